"""SQLite's trail index: written with the entries, filled by its migration, pruned
with them, and checked against the chain by verify (PostgreSQL reads the trail
from the chain; the trail tests in tests/reasoning run on both)."""

from __future__ import annotations

import marshal
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.clock import now_iso
from overt.errors import LedgerError
from overt.ledger import feeder, sql
from overt.ledger import sqlite as sqlite_ledger
from overt.ledger.sql import SQLITE as D
from overt.ledger.sqlite import SqliteLedger
from overt.ledger.trail_index import TRAIL_FIELDS, check, decode, index_rows, record
from overt.reasoning.trail import TurnTrail, assemble
from tests.conftest import run
from tests.reasoning.turns import (
    held_for_approval_then_approved,
    thinking_two_calls_a_denial_and_an_error,
)


def _scenario(ledger: SqliteLedger) -> None:
    """Two sessions, every kind the trail reads (a denial, an error, an approval)."""
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "first"))
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s2", "elsewhere"))
    run(held_for_approval_then_approved(ledger, "s1"))


@pytest.fixture
def written(tmp_path: Path) -> Iterator[tuple[Path, SqliteLedger]]:
    """A ledger file holding :func:`_scenario`, stored into SQLite, and its ledger."""
    db = tmp_path / "l.db"
    ledger = SqliteLedger.open(db)
    _scenario(ledger)
    ledger.sync()
    yield db, ledger
    ledger.close_sync()


def _from_chain(ledger: SqliteLedger, **scope: Any) -> list[TurnTrail]:
    """The trail as read from the chain itself, projected here (PostgreSQL's way)."""
    statement, params = sql.trail(D, **{"turn_id": None, "session_id": None, "since": None,
                                        "until": None, **scope})
    rows = ledger._query(statement, params)
    return assemble([(seq, record(kind, turn, session, at, decode(data)), body)
                     for seq, kind, at, turn, session, data, body in rows
                     if turn is not None])


def _indexed(ledger: SqliteLedger, **scope: Any) -> list[TurnTrail]:
    return assemble(run(ledger.trail_rows(**scope)))


def _same(a: list[TurnTrail], b: list[TurnTrail]) -> bool:
    fields = ("turn_id", "session_id", "started_at", "source", "model", "message", "status",
              "completed_at", "paused_on", "steps", "tool_calls", "decisions", "approvals")
    return [[getattr(t, f) for f in fields] for t in a] == \
        [[getattr(t, f) for f in fields] for t in b]


def _rows(db: Path, statement: str) -> list[Any]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(statement).fetchall()
    finally:
        conn.close()


def _tamper(db: Path, change: Callable[[sqlite3.Connection], object]) -> None:
    """Change the index as someone with database access could (its triggers dropped)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                    "AND tbl_name = 'trail_index'").fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        change(conn)
    finally:
        conn.close()


def _allowed(conn: sqlite3.Connection, seq: int) -> None:
    """The decision at ``seq`` made to read "allow" in the index."""
    (blob,) = conn.execute("SELECT record FROM trail_index WHERE seq = ?", (seq,)).fetchone()
    changed = tuple("allow" if v == "deny" else v for v in marshal.loads(blob))
    conn.execute("UPDATE trail_index SET record = ? WHERE seq = ?", (marshal.dumps(changed), seq))


@pytest.mark.parametrize("journal", [True, False])
def test_the_indexed_trail_is_the_trail_the_chain_holds_in_every_scope(
        tmp_path: Path, journal: bool) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db", journal=journal)
    since = now_iso()
    _scenario(ledger)
    turn_id = _indexed(ledger, session_id="s2")[0].turn_id
    for scope in ({"session_id": "s1"}, {"session_id": "s2"}, {"turn_id": turn_id},
                  {"since": since}, {"since": since, "session_id": "s1"}):
        indexed = _indexed(ledger, **scope)
        assert indexed and _same(indexed, _from_chain(ledger, **scope)), scope
    s1 = _indexed(ledger, session_id="s1")
    assert [t.message for t in s1] == ["first", "send the report"]
    assert s1[1].approvals[0].decision == "approved" and s1[0].decisions[0].effect == "deny"
    assert run(ledger.verify(check_bodies=False)).ok
    ledger.close_sync()


def test_the_index_holds_each_trail_entry_once_with_no_body_in_it(
        written: tuple[Path, SqliteLedger]) -> None:
    db, _ = written
    entries = _rows(db, "SELECT seq, kind FROM audit_log ORDER BY seq")
    indexed = _rows(db, "SELECT seq, record FROM trail_index ORDER BY seq")
    assert [s for s, _ in indexed] == [s for s, k in entries if k in TRAIL_FIELDS]
    for _, blob in indexed:
        kind, *_ = fields = marshal.loads(blob)
        assert len(fields) == 4 + len(TRAIL_FIELDS[kind])
        assert not {"first", "send the report"} & set(fields)  # bodies stay out


def test_a_ledger_written_before_the_index_is_filled_by_its_migration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "l.db"
    monkeypatch.setattr(sqlite_ledger, "MIGRATIONS", sqlite_ledger.MIGRATIONS[:9])
    monkeypatch.setattr(feeder, "index_rows", lambda entries, contents: [])  # as overt was
    old = SqliteLedger.open(db)
    _scenario(old)
    old.close_sync()
    monkeypatch.undo()
    assert _rows(db, "SELECT count(*) FROM audit_log")[0][0] > 0
    current = SqliteLedger.open(db)
    assert 10 in current.schema_versions()
    trail = _indexed(current, session_id="s1")
    assert [t.message for t in trail] == ["first", "send the report"]
    assert all(s.content is not None for t in trail for s in t.steps)
    assert _same(trail, _from_chain(current, session_id="s1"))
    assert run(current.verify(check_bodies=False)).ok
    current.close_sync()


def test_a_prune_removes_the_index_rows_of_what_it_removes(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "old"))
    time.sleep(0.002)
    cutoff = now_iso()
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "new"))
    pruned = run(ledger.prune(cutoff))
    assert pruned.removed_entries > 0
    assert _rows(tmp_path / "l.db", "SELECT min(seq) FROM trail_index")[0][0] > \
        pruned.through_seq
    assert [t.message for t in _indexed(ledger, session_id="s1")] == ["new"]
    assert run(ledger.verify(check_bodies=False)).ok  # the synthetic turn names bodies it
    ledger.close_sync()                                 # never stores


def test_the_index_is_append_only(written: tuple[Path, SqliteLedger]) -> None:
    conn = sqlite3.connect(written[0], isolation_level=None)
    for statement in ("UPDATE trail_index SET body_key = NULL",
                      "DELETE FROM trail_index WHERE seq = 2"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(statement)
    conn.close()


@pytest.mark.parametrize(("change", "problem"), [
    (_allowed, "record of entry {seq} does not match"),
    (lambda conn, seq: conn.execute(f"UPDATE trail_index SET record = x'00' WHERE seq = {seq}"),
     "record of entry {seq} does not match"),
    (lambda conn, seq: conn.execute(f"DELETE FROM trail_index WHERE seq = {seq}"),
     "lacks entry {seq}"),
    (lambda conn, seq: conn.execute("UPDATE trail_index SET body_key = (SELECT min(key) FROM "
                                    f"content_blobs) WHERE seq = {seq}"),
     "points entry {seq} at another entry's body"),
])
def test_verify_catches_an_index_that_does_not_match_the_chain(
        written: tuple[Path, SqliteLedger], change: Callable[[sqlite3.Connection, int], object],
        problem: str) -> None:
    db, ledger = written
    decision = _rows(db, "SELECT min(seq) FROM audit_log WHERE kind = 'policy.decision'")[0][0]
    _tamper(db, lambda conn: change(conn, decision))
    report = run(ledger.verify())
    assert not report.ok and report.index_bad and report.bad_seq == decision
    assert problem.format(seq=decision) in (report.problem or "")


def test_verify_catches_a_step_shown_with_another_steps_text(
        written: tuple[Path, SqliteLedger]) -> None:
    db, ledger = written
    first, second = _rows(db, "SELECT t.seq, t.body_key FROM trail_index t JOIN audit_log a "
                              "ON a.seq = t.seq WHERE a.kind = 'reasoning.step' ORDER BY 1")[:2]
    _tamper(db, lambda conn: conn.execute(
        f"UPDATE trail_index SET body_key = {second[1]} WHERE seq = {first[0]}"))
    report = run(ledger.verify())
    assert not report.ok and report.bad_seq == first[0]


def test_verify_catches_rows_no_entry_accounts_for(
        written: tuple[Path, SqliteLedger]) -> None:
    db, ledger = written
    forged = marshal.dumps(("turn.completed", "T", "s1", "2026-01-01T00:00:00Z", "completed"))
    _tamper(db, lambda conn: conn.execute(
        "INSERT INTO trail_index VALUES ('s1', 999999, NULL, ?)", (forged,)))
    report = run(ledger.verify())
    assert not report.ok and report.bad_seq is None
    assert "1 rows no entry accounts for" in (report.problem or "")


def test_entry_data_that_is_not_a_json_object_is_a_ledger_error_naming_it() -> None:
    entry = (7, "id", "turn.completed", "2026-01-01T00:00:00Z", "T", "s", "not json", "p", "h")
    with pytest.raises(LedgerError, match="entry 7's data is not JSON"):
        index_rows([entry], None)
    with pytest.raises(LedgerError, match="entry 7's data is not a JSON object"):
        index_rows([(*entry[:6], "[1, 2]", "p", "h")], None)
    assert check([(7, "turn.completed", "at", "T", "s", "{", b"", None, None, True)], 1) == (
        7, "entry 7's data is not JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)")
