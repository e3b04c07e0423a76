"""What only the SQLite backend does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from overt.errors import LedgerError
from overt.ledger.sqlite import SqliteLedger
from tests.conftest import latest


def test_the_ledger_file_is_in_wal_mode(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")
    assert sqlite3.connect(tmp_path / "l.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    ledger.close_sync()


def test_a_file_that_is_not_a_database_gives_a_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError):
        SqliteLedger.open(path)


def test_a_fresh_file_migrates_from_nothing(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "new.db", migrate=False)
    assert ledger.migrate() == latest(str(tmp_path))
    assert ledger.migrate() == []
    ledger.close_sync()


def test_a_ledger_opened_with_a_clock_stamps_its_entries_with_it_and_verifies(
        tmp_path: Path) -> None:
    from overt.events import InferenceRecorded
    from tests.conftest import run

    inference = InferenceRecorded(
        turn_id="t1", session_id="s1", inference_id="i1", iteration=0, model="m",
        route="default", input_tokens=1, output_tokens=1, cost_usd=0.0, duration_ms=1.0,
        tools_offered=[], tool_calls_requested=0, stop_reason="end_turn",
        response_digest=None)

    async def write() -> tuple[list[str], bool]:
        stamp = "2026-01-02T12:00:00.000000Z"
        ledger = SqliteLedger.open(tmp_path / "c.db", clock=lambda: stamp)
        try:
            entries = await ledger.record([inference])
            report = await ledger.verify()
            return [e.at for e in entries], report.ok
        finally:
            await ledger.close()

    stamped, verified = run(write())
    assert stamped == ["2026-01-02T12:00:00.000000Z"] and verified
