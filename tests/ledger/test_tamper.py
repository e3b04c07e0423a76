"""The tamper matrix: what someone with database access may try, on both backends,
and how each attempt is prevented (the database refuses it) or detected
(``overt ledger verify`` exits 3). The README's "Tamper matrix" table is this file.

Cases that need signed checkpoints (a truncated tail, a re-hashed chain, a forged
prune) are the proofs helper's, beside its checkpoint tests.
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from overt.cli.main import main
from overt.errors import LedgerError
from overt.ledger.export import export_jsonl
from overt.models.fake import ScriptedModel
from overt.tools.base import tool
from tests.backends import Raw
from tests.conftest import RuntimeFactory, cli_message, run

EXIT_VERIFY = 3


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def one_turn(make_runtime: RuntimeFactory) -> None:
    """One turn with a tool call, stored in the database before anyone tampers with it."""
    model = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": "k"}}]},
                           "the value"])
    runtime = make_runtime(model, tools=[lookup])
    result = run(runtime.respond(cli_message("what is k?")))
    assert result.error is None
    run(runtime.ledger.verify())


def verify_exit(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--db", ledger_url, "ledger", "verify"])
    return code, capsys.readouterr().out


def seq_of(raw: Raw, kind: str) -> int:
    return int(raw.query(f"SELECT seq FROM audit_log WHERE kind = '{kind}'")[0][0])


def test_an_untouched_ledger_verifies_with_exit_0(
    make_runtime: RuntimeFactory, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    assert verify_exit(ledger_url, capsys)[0] == 0


def test_change_an_entry_is_refused_by_the_database_and_detected_without_the_guard(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    statement = ("UPDATE audit_log SET data = replace(data, 'lookup', 'lookuq') "
                 "WHERE kind = 'tool_call.completed'")
    with pytest.raises(raw.append_only_error):
        raw.execute(statement)
    raw.drop_guards().execute(statement)
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "hash does not match" in out


def test_delete_an_entry_is_refused_by_the_database_and_detected_without_the_guard(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    seq = seq_of(raw, "tool_call.started")
    with pytest.raises(raw.append_only_error):
        raw.execute(f"DELETE FROM audit_log WHERE seq = {seq}")
    raw.drop_guards().execute(f"DELETE FROM audit_log WHERE seq = {seq}")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "missing entry before it" in out


def test_insert_an_entry_at_the_tail_is_detected(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    (head,) = raw.query("SELECT max(seq) FROM audit_log")[0]
    # INSERT is what every writer may do: a forged entry that claims to follow the head
    raw.execute("INSERT INTO audit_log (seq, id, kind, at, turn_id, session_id, data, "
                f"prev_hash, hash) SELECT {head} + 1, id || 'x', kind, at, turn_id, "
                f"session_id, data, hash, hash FROM audit_log WHERE seq = {head}")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and f"FAILED at entry seq {head + 1}" in out


def test_reorder_two_entries_is_detected(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str, backend: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    started, inference = seq_of(raw, "turn.started"), seq_of(raw, "inference")
    raw.drop_guards()
    raw.execute(f"UPDATE audit_log SET seq = -1 WHERE seq = {started}")
    raw.execute(f"UPDATE audit_log SET seq = {started} WHERE seq = {inference}")
    raw.execute(f"UPDATE audit_log SET seq = {inference} WHERE seq = -1")
    code = main(["--db", ledger_url, "ledger", "verify"])
    out, _err = capsys.readouterr()
    assert code == EXIT_VERIFY and "FAILED at entry seq 2: prev_hash" in out


def test_delete_a_content_body_is_refused_by_the_database_and_detected_without_the_guard(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    (result,) = [e.data["result_digest"]
                 for e in run(ledger.entries(kinds=["tool_call.completed"]))]
    statement = f"DELETE FROM content_blobs WHERE digest = '{result}'"
    with pytest.raises(raw.append_only_error):
        raw.execute(statement)
    raw.drop_guards().execute(statement)
    report = run(ledger.verify())
    assert not report.ok and result in (report.problem or "")
    assert report.bad_seq == seq_of(raw, "tool_call.completed")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "is missing" in out


def test_a_body_gone_with_a_recorded_prune_is_not_a_failure(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    from overt.clock import now_iso

    one_turn(make_runtime)
    run(ledger.prune(now_iso()))
    one_turn(make_runtime)
    assert run(ledger.verify()).ok


# -- a read error while verifying or exporting: never ok on a partial ledger ----------


class _Failing:
    """A connection (or cursor, or pool) whose statements touching ``table`` fail
    as a full disk would; everything else is the real object's."""

    def __init__(self, real: Any, table: str, error: Exception) -> None:
        self._real, self._table, self._error = real, table, error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __enter__(self) -> _Failing:
        self._real.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._real.__exit__(*exc)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._real)

    def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        if self._table in str(statement):
            raise self._error
        answer = self._real.execute(statement, *args, **kwargs)
        return self if answer is self._real else answer

    def cursor(self, *args: Any, **kwargs: Any) -> _Failing:
        return _Failing(self._real.cursor(*args, **kwargs), self._table, self._error)

    @contextlib.contextmanager
    def connection(self, *args: Any, **kwargs: Any) -> Iterator[_Failing]:
        with self._real.connection(*args, **kwargs) as conn:
            yield _Failing(conn, self._table, self._error)


def inject_read_error(ledger: Any, monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    if ledger.backend == "sqlite":  # each reader thread's connection
        error: Exception = sqlite3.OperationalError("disk I/O error")
        reader_conn = ledger._reader_conn
        monkeypatch.setattr(ledger, "_reader_conn",
                            lambda: _Failing(reader_conn(), table, error))
        return
    import psycopg

    error = psycopg.errors.DiskFull("could not write to file: No space left on device")
    connect = ledger._connect
    monkeypatch.setattr(ledger, "_connect",
                        lambda *a, **k: _Failing(connect(*a, **k), table, error))
    monkeypatch.setattr(ledger, "_pool", _Failing(ledger._pool, table, error))


@pytest.mark.parametrize("table", ["audit_log", "content_blobs"])
def test_a_read_error_makes_verify_fail_loudly(
    make_runtime: RuntimeFactory, ledger: Any, monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    one_turn(make_runtime)
    run(ledger.verify())  # anything waiting is stored before the disk fails
    inject_read_error(ledger, monkeypatch, table)
    with pytest.raises(LedgerError, match="cannot read ledger"):
        run(ledger.verify())


def test_a_read_error_makes_export_fail_loudly(
    make_runtime: RuntimeFactory, ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_turn(make_runtime)
    run(ledger.verify())
    inject_read_error(ledger, monkeypatch, "audit_log")
    out = io.StringIO()
    with pytest.raises(LedgerError, match="cannot read ledger"):
        run(export_jsonl(ledger, out))
    assert out.getvalue() == ""


# -- the SQLite gate: no row in any table switches the append-only guards off ---------


def test_sqlite_has_no_gate_table_one_insert_could_open(tmp_path: Any) -> None:
    from overt.ledger.sqlite import SqliteLedger

    db = tmp_path / "l.db"
    ledger = SqliteLedger.open(db)
    ledger.close_sync()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            conn.execute("INSERT INTO overt_prune_gate VALUES (999999)")
        guards = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                              "AND name LIKE '%_no_delete'").fetchall()
        assert {"audit_log_no_delete", "content_blobs_no_delete",
                "trail_index_no_delete"} <= {name for name, _ in guards}
        assert all(" WHEN " not in sql for _, sql in guards)  # no condition to satisfy
    finally:
        conn.close()


def test_the_guards_stand_again_after_a_prune(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw
) -> None:
    from overt.clock import now_iso

    one_turn(make_runtime)
    record = run(ledger.prune(now_iso()))
    assert record.removed_entries > 0
    one_turn(make_runtime)
    for table in ("audit_log", "content_blobs"):
        with pytest.raises(raw.append_only_error):
            raw.execute(f"DELETE FROM {table}")
    assert run(ledger.verify()).ok


def test_a_ledger_with_the_old_gate_loses_it_on_migration(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from overt.clock import now_iso
    from overt.ledger import sqlite as sqlite_ledger
    from overt.ledger.sqlite import SqliteLedger

    db = tmp_path / "l.db"
    monkeypatch.setattr(sqlite_ledger, "MIGRATIONS", sqlite_ledger.MIGRATIONS[:9])
    SqliteLedger.open(db).close_sync()
    monkeypatch.undo()
    current = SqliteLedger.open(db)
    assert 10 in current.schema_versions()
    run(current.prune(now_iso()))
    assert run(current.verify()).ok
    current.close_sync()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'overt_prune_gate'"
                                ).fetchall()
    finally:
        conn.close()
