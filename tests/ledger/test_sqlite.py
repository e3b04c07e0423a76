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
