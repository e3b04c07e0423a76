"""A ledger opened read-only reads as any other and writes nothing: a write is refused
with a clear error, and the ledger stays as it was (both backends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from overt.errors import LedgerError, UsageError
from overt.events import TurnStarted
from overt.ledger import open_ledger
from overt.ledger.canonical import digest_text
from tests import backends
from tests.conftest import run


def _event(n: int) -> TurnStarted:
    return TurnStarted(turn_id=f"T{n}", session_id="S-1", source="cli",
                       caller_session_id="cli:S-1", message_digest=digest_text(f"m{n}"),
                       model="m", route="default", max_tool_calls=5, actor="operator:default")


def test_a_ledger_opened_read_only_reads_and_refuses_every_write(ledger: Any,
                                                                 ledger_url: str) -> None:
    for n in range(3):
        run(ledger.record([_event(n)], {digest_text(f"m{n}"): f"m{n}"}))
    reader: Any = open_ledger(ledger_url, read_only=True)
    try:
        assert reader.read_only
        assert [e.turn_id for e in run(reader.entries(kinds=["turn.started"]))] == [
            "T0", "T1", "T2"]
        assert run(reader.content(digest_text("m1"))) == "m1"
        assert (run(reader.trail_rows(session_id="S-1"))) is not None
        report = run(reader.verify())
        assert report.ok and report.entries == 3
        for write in (lambda: run(reader.record([_event(9)])),
                      lambda: reader.record_sync([_event(9)]),
                      lambda: run(reader.prune("2999-01-01T00:00:00Z")),
                      reader.migrate):
            with pytest.raises(LedgerError, match="open read-only"):
                write()
        # the writer goes on beside it, and the reader sees what it appends
        run(ledger.record([_event(3)], {digest_text("m3"): "m3"}))
        assert len(run(reader.entries(kinds=["turn.started"]))) == 4
    finally:
        reader.close_sync()
    assert [e.turn_id for e in run(ledger.entries(kinds=["turn.started"]))] == [
        "T0", "T1", "T2", "T3"]
    assert run(ledger.verify()).ok


def test_a_ledger_never_migrated_is_not_read_read_only_and_nothing_is_made(
        backend: str, tmp_path: Path) -> None:
    url = backends.new_url(backend, tmp_path)
    try:
        with pytest.raises(LedgerError, match=r"no such file|lacks migration 1"):
            open_ledger(url, read_only=True)
        if backend == "sqlite":
            assert list(tmp_path.iterdir()) == []
            Path(url).touch()  # an empty file: a new ledger, not migrated yet
            with pytest.raises(LedgerError, match="lacks migration 1"):
                open_ledger(url, read_only=True)
            assert Path(url).stat().st_size == 0
        else:
            schema = url.rsplit("schema=", 1)[1]
            with psycopg.connect(backends.PG_BASE) as conn:
                assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                    (schema,)).fetchall() == []
    finally:
        if backend == "postgres":
            backends.drop(url)


def test_a_sqlite_uri_is_refused_and_nothing_is_made(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("file:ledger.db?mode=ro", f"file:{tmp_path}/l.db?mode=ro",
                "sqlite:///file:l.db"):
        with pytest.raises(UsageError, match="is a SQLite URI"):
            open_ledger(url)
    assert list(tmp_path.iterdir()) == []


def test_a_ledger_path_holding_a_nul_is_refused_as_usage_not_a_value_error(
        tmp_path: Path) -> None:
    """Only a config file can carry a NUL into ``db`` (argv and the environment cannot);
    SQLite's connect raised a bare ValueError, a traceback from every command."""
    from overt.config import file as config_file

    with pytest.raises(UsageError, match="holds a NUL character"):
        open_ledger(f"{tmp_path}/a\0b.db")
    toml = tmp_path / "overt.toml"
    toml.write_text('db = "a\\u0000b.db"\n')
    with pytest.raises(UsageError, match="holds a NUL character"):
        config_file.load({}, path=toml)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["overt.toml"]
