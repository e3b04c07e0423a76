from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from overt.errors import LedgerError
from overt.events import RuntimeStarted, TurnStarted
from overt.ledger.canonical import digest_text
from overt.ledger.sqlite import SqliteLedger
from tests.conftest import run

TABLES = ["audit_log", "content_blobs", "overt_migrations"]


def _event(n: int) -> TurnStarted:
    return TurnStarted(turn_id=f"T{n}", session_id="S-1", source="cli", caller_session_id="cli:S-1",
                       message_digest=digest_text(f"m{n}"), model="m", route="default",
                       max_tool_calls=5)


def _fill(ledger: SqliteLedger, n: int = 6) -> None:
    for i in range(n):
        ledger.record_sync([_event(i)], {digest_text(f"m{i}"): f"m{i}"})


def _raw(path: Path) -> sqlite3.Connection:
    """A plain connection with the append-only triggers dropped, as an attacker would."""
    conn = sqlite3.connect(path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    return conn


def test_migrations_run_once_and_running_them_again_is_a_no_op(db_path: Path) -> None:
    first = SqliteLedger.open(db_path, migrate=False)
    assert first.migrate() == [1]
    assert first.migrate() == []
    first.close_sync()
    again = SqliteLedger.open(db_path)
    assert again.schema_versions() == [1]
    again.close_sync()


def test_the_ledger_file_is_in_wal_mode(ledger: SqliteLedger, db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("table", TABLES)
def test_update_of_a_ledger_row_is_rejected_by_the_database(
    ledger: SqliteLedger, db_path: Path, table: str
) -> None:
    _fill(ledger)
    conn = sqlite3.connect(db_path)
    column = {"audit_log": "kind", "content_blobs": "body", "overt_migrations": "name"}[table]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(f"UPDATE {table} SET {column} = 'x'")


@pytest.mark.parametrize("table", TABLES)
def test_delete_of_a_ledger_row_is_rejected_by_the_database(
    ledger: SqliteLedger, db_path: Path, table: str
) -> None:
    _fill(ledger)
    conn = sqlite3.connect(db_path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(f"DELETE FROM {table}")


def test_a_fresh_chain_verifies(ledger: SqliteLedger) -> None:
    _fill(ledger)
    report = ledger.verify_sync()
    assert report.ok and report.entries == 6 and report.last_seq == 6
    assert report.content_checked == 6


def test_an_empty_ledger_verifies(ledger: SqliteLedger) -> None:
    assert ledger.verify_sync().ok


@pytest.mark.parametrize(
    "column", ["id", "kind", "at", "turn_id", "session_id", "data", "prev_hash", "hash"]
)
def test_changing_a_byte_of_any_column_is_caught_by_verify(
    ledger: SqliteLedger, db_path: Path, column: str
) -> None:
    _fill(ledger)
    conn = _raw(db_path)
    value = conn.execute(f"SELECT {column} FROM audit_log WHERE seq = 4").fetchone()[0]
    changed = value[:-2] + ("0" if value[-2] != "0" else "1") + value[-1]
    conn.execute(f"UPDATE audit_log SET {column} = ? WHERE seq = 4", (changed,))
    report = ledger.verify_sync()
    assert not report.ok
    assert report.bad_seq in (4, 5)  # a changed hash shows at the entry that follows it
    if column != "hash":
        assert report.bad_seq == 4


def test_a_deleted_entry_is_caught_by_verify(ledger: SqliteLedger, db_path: Path) -> None:
    _fill(ledger)
    _raw(db_path).execute("DELETE FROM audit_log WHERE seq = 3")
    report = ledger.verify_sync()
    assert not report.ok and report.bad_seq == 4 and "missing" in (report.problem or "")


def test_a_deleted_last_entry_leaves_a_shorter_chain_that_verifies_up_to_its_head(
    ledger: SqliteLedger, db_path: Path
) -> None:
    # Truncating the tail cannot be detected from the chain alone; the head hash
    # that verify prints is what an operator anchors elsewhere to catch it.
    _fill(ledger)
    head = ledger.verify_sync().head_hash
    _raw(db_path).execute("DELETE FROM audit_log WHERE seq = 6")
    report = ledger.verify_sync()
    assert report.ok and report.head_hash != head


def test_an_inserted_entry_is_caught_by_verify(ledger: SqliteLedger, db_path: Path) -> None:
    _fill(ledger)
    conn = _raw(db_path)
    row = conn.execute("SELECT * FROM audit_log WHERE seq = 6").fetchone()
    conn.execute("UPDATE audit_log SET seq = 7 WHERE seq = 6")
    conn.execute("INSERT INTO audit_log VALUES (6, 'X', ?, ?, ?, ?, ?, ?, ?)", row[2:])
    assert ledger.verify_sync().bad_seq == 6


def test_two_swapped_entries_are_caught_by_verify(ledger: SqliteLedger, db_path: Path) -> None:
    _fill(ledger)
    conn = _raw(db_path)
    conn.execute("UPDATE audit_log SET seq = -2 WHERE seq = 2")
    conn.execute("UPDATE audit_log SET seq = 2 WHERE seq = 3")
    conn.execute("UPDATE audit_log SET seq = 3 WHERE seq = -2")
    report = ledger.verify_sync()
    assert not report.ok and report.bad_seq == 2


def test_a_changed_content_body_is_caught_by_verify(ledger: SqliteLedger, db_path: Path) -> None:
    _fill(ledger)
    _raw(db_path).execute("UPDATE content_blobs SET body = 'tampered' WHERE body = 'm2'")
    report = ledger.verify_sync()
    assert not report.ok and report.content_bad == [digest_text("m2")]


def test_record_writes_entries_and_content_in_one_transaction(ledger: SqliteLedger) -> None:
    entries = ledger.record_sync([_event(1), _event(2)], {digest_text("m1"): "m1"})
    assert [e.seq for e in entries] == [1, 2]
    assert entries[1].prev_hash == entries[0].hash
    assert run(ledger.content(digest_text("m1"))) == "m1"
    assert [e.kind for e in run(ledger.entries(turn_id="T2"))] == ["turn.started"]


def test_event_data_that_is_not_json_is_refused_and_nothing_is_written(
    ledger: SqliteLedger,
) -> None:
    bad = RuntimeStarted(overt_version="1", pid=1, host="h", model=float("nan"))  # type: ignore[arg-type]
    with pytest.raises(LedgerError):
        ledger.record_sync([_event(1), bad])
    assert run(ledger.entries()) == []


def test_a_file_that_is_not_a_database_gives_a_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError):
        SqliteLedger.open(path)


def test_two_ledgers_on_one_file_share_one_chain(db_path: Path) -> None:
    a, b = SqliteLedger.open(db_path), SqliteLedger.open(db_path)
    for i in range(10):
        (a if i % 2 else b).record_sync([_event(i)])
    report = a.verify_sync()
    assert report.ok and report.entries == 10
    a.close_sync()
    b.close_sync()
