"""A ledger written by the overt that kept a journal in front of SQLite opens under
the writer thread with every record stored, the chain verified and the journal retired."""

from __future__ import annotations

import marshal  # the old format itself, to write frames of it
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from overt.errors import LedgerError
from overt.ledger.legacy_journal import journal_path, read_frames
from overt.ledger.sqlite import SqliteLedger
from overt.reasoning.trail import build_trail
from tests.conftest import latest, run

FIXTURES = Path(__file__).parent / "fixtures"


def _copy(tmp_path: Path) -> Path:
    db = tmp_path / "l.db"
    shutil.copy(FIXTURES / "journal-ledger.db", db)
    shutil.copy(FIXTURES / "journal-ledger.db-overt-journal", journal_path(str(db)))
    return db


def test_records_only_in_the_old_journal_are_stored_and_the_journal_retired(
        tmp_path: Path) -> None:
    db = _copy(tmp_path)
    ledger = SqliteLedger.open(db)
    assert run(ledger.count("turn.started")) == 3
    assert len(run(ledger.entries())) == 47
    assert run(ledger.verify(check_bodies=False)).ok  # index included
    assert ledger.schema_versions() == latest(str(db))
    trail = run(build_trail(ledger, session_id="s1"))
    assert [t.message for t in trail.turns] == ["send the report", "first"]
    ledger.close_sync()
    assert not Path(journal_path(str(db))).exists()
    assert Path(journal_path(str(db)) + ".retired").exists()
    again = SqliteLedger.open(db)  # nothing left to store: opens as any ledger
    assert len(run(again.entries())) == 47 and run(again.verify(check_bodies=False)).ok
    again.close_sync()


def test_a_torn_last_frame_was_never_committed_and_is_dropped(tmp_path: Path) -> None:
    db = _copy(tmp_path)
    path = Path(journal_path(str(db)))
    path.write_bytes(path.read_bytes() + struct.pack("<II", 500, 0) + b"partial")
    ledger = SqliteLedger.open(db)
    assert len(run(ledger.entries())) == 47 and run(ledger.verify(check_bodies=False)).ok
    ledger.close_sync()


def test_a_corrupt_frame_is_refused_and_the_journal_left_in_place(tmp_path: Path) -> None:
    db = _copy(tmp_path)
    path = Path(journal_path(str(db)))
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # a complete last frame with one flipped bit: not a torn write
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerError, match="does not match its checksum"):
        SqliteLedger.open(db)
    assert path.exists()


def test_a_journal_that_does_not_continue_the_database_is_refused(tmp_path: Path) -> None:
    db = _copy(tmp_path)
    frames = read_frames(journal_path(str(db)))
    later = frames[4]  # entries 16-: the database holds entries to 11
    body = marshal.dumps({"base": [0, frames[0]["base"][1]]}, 4)
    batch = marshal.dumps(later, 4)
    Path(journal_path(str(db))).write_bytes(
        struct.pack("<II", len(body), zlib.crc32(body)) + body
        + struct.pack("<II", len(batch), zlib.crc32(batch)) + batch)
    with pytest.raises(LedgerError, match="does not continue the chain"):
        SqliteLedger.open(db)


def test_a_ledger_at_sqlites_old_numbering_is_renumbered_and_migrated(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    shutil.copy(FIXTURES / "old-numbering-at-10.db", db)
    ledger = SqliteLedger.open(db)
    assert ledger.schema_versions() == latest(str(db))
    assert run(ledger.verify(check_bodies=False)).ok and len(run(ledger.entries())) == 29
    trail = run(build_trail(ledger, session_id="s1"))
    assert [t.message for t in trail.turns] == ["send the report", "first"]
    assert trail.turns[1].decisions[0].effect == "deny"
    names = dict(ledger._query("SELECT version, name FROM overt_migrations"))
    assert names[10].startswith("prunes only through the sealed path")
    pruned = run(ledger.prune("9999-01-01T00:00:00Z"))  # the gate is gone: prunes work
    assert pruned.removed_entries > 0 and run(ledger.verify()).ok
    assert not ledger._query("SELECT 1 FROM sqlite_master WHERE name = 'overt_prune_gate'")
    ledger.close_sync()
