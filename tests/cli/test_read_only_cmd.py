"""Commands that only read work on a ledger this process may not write; a command that
writes is refused with a clear message and exit 5, and the ledger stays as it was.

"May not write" is the kernel's answer, not a pretence: the file is 0444 and its
folder 0555, and the commands run in a process those modes bind. As a user they
do; as root (the tests may run as root) they bind a process run without the
capabilities that override file permissions (``setpriv --bounding-set``), so the
same checks apply as to any user. Each test first checks that such a process
indeed cannot write there."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from overt.cli.main import main
from tests import backends
from tests.conftest import run

OVERRIDES = "-dac_override,-dac_read_search,-fowner,-linux_immutable"


def _unprivileged() -> list[str]:
    """The prefix that runs a command bound by file modes (nothing for a user)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no process here is bound by file modes")
    return [setpriv, f"--bounding-set={OVERRIDES}"]


def _overt(db: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([*_unprivileged(), sys.executable, "-m", "overt.cli.main",
                           "--db", str(db), *argv],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """A ledger with one turn, in a folder and file no write may reach; (its path,
    the turn's id, its session's id)."""
    folder = tmp_path / "ledger"
    db = folder / "l.db"
    script = tmp_path / "replies.jsonl"
    script.write_text('{"text": "All quiet."}\n')
    assert main(["--db", str(db), "ask", "anything?", "--model", f"scripted:{script}",
                 "--json"]) == 0
    from overt.ledger import open_ledger

    ledger: Any = open_ledger(str(db))
    [started] = run(ledger.entries(kinds=["turn.started"]))
    ledger.close_sync()
    (folder / "transcript.jsonl").unlink()
    db.chmod(0o444)
    folder.chmod(0o555)
    probe = subprocess.run([*_unprivileged(), sys.executable, "-c",
                            f"open({str(db)!r}, 'a')"], capture_output=True, text=True)
    if "setpriv:" in probe.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {probe.stderr.strip()}")
    assert "PermissionError" in probe.stderr  # the process is bound: the test is real
    try:
        yield db, started.turn_id or "", started.session_id or ""
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)


def _state(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.mark.slow
def test_reading_commands_work_on_a_ledger_this_process_may_not_write(
        locked: tuple[Path, str, str]) -> None:
    db, turn, session = locked
    before = _state(db.parent)
    for argv, shows in ((["ledger", "verify"], "ok: 4 entries verified"),
                        (["runs"], turn), (["show", turn, "--content"], "All quiet."),
                        (["sessions"], session), (["sessions", "show", session], "All quiet."),
                        (["trail", session], turn), (["export", turn], f"## Turn {turn}"),
                        (["ledger", "export"], '"kind":"turn.completed"'),
                        (["usage", "--since", "all"], "total")):
        out = _overt(db, *argv)
        assert out.returncode == 0, (argv, out.stderr)
        assert shows in out.stdout, (argv, out.stdout)
    assert _state(db.parent) == before  # not a byte, not a -wal or -shm file


@pytest.mark.slow
def test_a_write_is_refused_clearly_and_loses_nothing(tmp_path: Path,
                                                      locked: tuple[Path, str, str]) -> None:
    db, _, _ = locked
    before = _state(db.parent)
    script = tmp_path / "replies.jsonl"
    asked = _overt(db, "ask", "again?", "--model", f"scripted:{script}")
    assert asked.returncode == 5
    assert asked.stderr.startswith(f"overt: cannot open ledger {db}: ")
    assert "this process cannot write the file or its folder" in asked.stderr
    pruned = _overt(db, "--read-only", "ledger", "prune", "--older-than", "1s")
    assert (pruned.returncode, pruned.stderr) == (
        5, f"overt: ledger {db} is open read-only: nothing was written\n")
    refused = _overt(db, "trail", "cli:someone-else")  # a refusal is recorded: a write
    assert refused.returncode == 5 and "open read-only" in refused.stderr
    assert _state(db.parent) == before
    assert _overt(db, "ledger", "verify").returncode == 0


@pytest.mark.slow
def test_read_only_flag_reads_and_refuses_a_write_on_both_backends(
        ledger_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text('{"text": "All quiet."}\n')
    assert main(["--db", ledger_url, "ask", "anything?", "--model", f"scripted:{script}"]) == 0
    capsys.readouterr()
    assert main(["--db", ledger_url, "--read-only", "ledger", "verify"]) == 0
    assert "ok: 4 entries verified" in capsys.readouterr().out
    assert main(["--db", ledger_url, "--read-only", "ledger", "prune",
                 "--older-than", "1s"]) == 5
    assert "is open read-only: nothing was" in capsys.readouterr().err
    assert main(["--db", ledger_url, "--read-only", "ask", "more?", "--model",
                 f"scripted:{script}"]) == 5
    assert "is open read-only: nothing was written" in capsys.readouterr().err
    assert main(["--db", ledger_url, "ledger", "verify"]) == 0
    assert "ok: 4 entries verified" in capsys.readouterr().out  # nothing was added


def test_a_sqlite_uri_for_db_is_a_usage_error_and_makes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OVERT_CONFIG", raising=False)
    assert main(["--db", f"file:{tmp_path}/l.db?mode=ro", "ledger", "verify"]) == 2
    assert "is a SQLite URI, not a ledger" in capsys.readouterr().err
    (tmp_path / "overt.toml").write_text('db = "file:l.db?mode=ro"\n')
    assert main(["--config", str(tmp_path / "overt.toml"), "runs"]) == 2
    assert "is a SQLite URI, not a ledger" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["overt.toml"]


READING = [("ledger", "verify"), ("ledger", "export"), ("runs",), ("usage",), ("trail", "cli:x"),
           ("sessions",), ("export", "01JTURN"), ("show", "01JTURN"), ("memory", "search", "x"),
           ("ledger", "verify", "--checkpoints", "w")]


@pytest.mark.parametrize("argv", READING)
def test_a_reading_command_on_a_ledger_that_is_not_there_says_so_and_makes_none(
        backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        argv: tuple[str, ...]) -> None:
    typo = backends.new_url(backend, tmp_path / "missing", "ledgr")  # a mistyped --db or
    try:  # ?schema=: verify must not call a new empty ledger ok
        assert main(["--db", typo, *argv]) == 5
        err = capsys.readouterr().err
        if backend == "sqlite":
            assert err == (f"overt: no ledger at {typo}: no such file (opened only if it "
                           "is there: nothing was made)\n")
            assert not (tmp_path / "missing").exists()
        else:
            schema = typo.rsplit("schema=", 1)[1]
            assert err == (f"overt: no ledger at {typo}: there is no schema {schema} "
                           "(opened only if it is there: nothing was created)\n")
            assert backends.pg_tables(schema) is None
    finally:
        if backend == "postgres":
            backends.drop(typo)


@pytest.mark.parametrize("argv", [("ledger", "verify"), ("runs",)])
def test_a_reading_command_on_a_file_or_schema_holding_no_ledger_leaves_it_as_it_was(
        backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        argv: tuple[str, ...]) -> None:
    url = backends.new_url(backend, tmp_path)
    try:
        if backend == "sqlite":
            Path(url).touch()
        else:
            with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{url.rsplit("schema=", 1)[1]}"')
        assert main(["--db", url, *argv]) == 5
        assert "holds no overt ledger" in capsys.readouterr().err
        if backend == "sqlite":
            assert [(p.name, p.stat().st_size) for p in tmp_path.iterdir()] == [
                ("ledger.db", 0)]
        else:
            assert backends.pg_tables(url.rsplit("schema=", 1)[1]) == []
    finally:
        if backend == "postgres":
            backends.drop(url)


def test_a_writing_command_still_makes_the_ledger_it_names(
        backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text('{"text": "All quiet."}\n')
    migrated, asked = (backends.new_url(backend, tmp_path / "new", name)
                       for name in ("migrated", "asked"))
    try:
        assert main(["--db", migrated, "runs"]) == 5  # not there yet: reading makes none
        assert main(["--db", migrated, "ledger", "migrate"]) == 0
        assert main(["--db", asked, "ask", "anything?", "--model", f"scripted:{script}"]) == 0
        capsys.readouterr()
        for url, entries in ((migrated, 0), (asked, 4)):
            assert main(["--db", url, "ledger", "verify"]) == 0
            assert f"ok: {entries} entries verified" in capsys.readouterr().out
    finally:
        if backend == "postgres":
            backends.drop(migrated)
            backends.drop(asked)
