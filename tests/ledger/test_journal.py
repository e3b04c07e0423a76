"""The SQLite ledger's journal: frames, crashes, rotation, several writers, failures."""

from __future__ import annotations

import marshal
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import pytest

from overt.errors import LedgerError
from overt.events import TurnStarted
from overt.ledger import feeder, journal, sqlite
from overt.ledger.journal import HEADER, decode, encode, journal_path
from overt.ledger.sqlite import SqliteLedger
from tests.conftest import run


def _event(n: int, session: str = "s") -> TurnStarted:
    return TurnStarted(turn_id=f"t{n}", session_id=session, source="cli",
                       caller_session_id="cli:s", model="scripted", route="default",
                       max_tool_calls=5, message_digest=f"sha256:{n:064x}")


def _stored(path: Path) -> int:
    """Entries in the SQLite file itself, as a program other than overt reads it."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM audit_log").fetchone()[0])
    finally:
        conn.close()


def _hold_feeder(ledger: SqliteLedger) -> None:
    """Stop the ledger's feeder thread: records then stay in the journal until a read."""
    assert ledger._feeder is not None
    ledger._feeder._stopping = True
    ledger._feeder.wake()
    assert ledger._feeder._thread is not None
    ledger._feeder._thread.join()


def _held(db: Path) -> SqliteLedger:
    """A ledger on ``db`` whose feeder thread stores nothing (see :func:`_hold_feeder`)."""
    ledger = SqliteLedger.open(db)
    _hold_feeder(ledger)
    return ledger


def _killed(ledger: SqliteLedger) -> None:
    """Let go of the journal as a killed process would: nothing more stored, no rotation."""
    assert ledger._journal is not None
    ledger._journal.close()


# -- frames ---------------------------------------------------------------------

def test_frames_round_trip_and_a_torn_last_frame_is_told_apart_from_nothing() -> None:
    frames = [encode({"entries": [[n, "id", "k", "at", None, "s", "{}", "p", "h"]]})
              for n in range(3)]
    data = b"".join(frames)
    payloads, used, torn = decode(data, 0, "j")
    assert [p["entries"][0][0] for p in payloads] == [0, 1, 2]
    assert (used, torn) == (len(data), False)
    for cut in (1, HEADER.size - 1, HEADER.size + 1, len(frames[2]) - 1):
        payloads, used, torn = decode(data[:len(data) - len(frames[2]) + cut], 0, "j")
        assert (len(payloads), used, torn) == (2, len(frames[0]) + len(frames[1]), True)


def test_a_last_frame_that_does_not_match_its_checksum_is_torn() -> None:
    first, last = encode({"base": [0, "g"]}), bytearray(encode({"base": [1, "h"]}))
    last[-1] ^= 0xFF
    payloads, used, torn = decode(first + bytes(last), 0, "j")
    assert (len(payloads), used, torn) == (1, len(first), True)


def test_a_bad_frame_before_the_last_is_corruption_not_a_tear() -> None:
    first = bytearray(encode({"base": [0, "g"]}))
    first[-2] ^= 0x01
    with pytest.raises(LedgerError, match="corrupt at byte 0"):
        decode(bytes(first) + encode({"base": [1, "h"]}), 0, "j")


def test_a_frame_this_python_cannot_read_is_an_error_that_says_so() -> None:
    body = b"\xff not marshal"
    frame = HEADER.pack(len(body), zlib.crc32(body)) + body
    with pytest.raises(LedgerError, match="cannot read it"):
        decode(frame, 0, "j")


def test_a_payload_marshal_cannot_hold_is_refused_before_anything_is_written() -> None:
    with pytest.raises(LedgerError, match="cannot be written"):
        encode({"entries": [object()]})


def test_the_base_frame_names_the_python_that_wrote_it() -> None:
    payloads, _, _ = decode(journal.base_frame((3, "sha256:x")), 0, "j")
    assert payloads == [{"base": [3, "sha256:x"], "python": journal.PYTHON}]
    assert marshal.version >= journal.MARSHAL_VERSION


# -- the ledger on its journal ----------------------------------------------------

def test_a_record_is_in_the_journal_first_and_every_read_catches_sqlite_up(
        tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = _held(db)
    run(ledger.record([_event(1), _event(2)]))
    assert _stored(db) == 0  # written to the journal, not yet to SQLite
    assert os.path.getsize(journal_path(str(db))) > 0
    assert [e.seq for e in run(ledger.entries())] == [1, 2]  # the read stored them
    assert _stored(db) == 2
    run(ledger.record([_event(3)]))
    ledger.sync()
    assert _stored(db) == 3
    ledger.close_sync()


def test_the_feeder_thread_stores_records_once_appends_pause(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = SqliteLedger.open(db)
    run(ledger.record([_event(1)]))
    deadline = time.monotonic() + 10
    while _stored(db) < 1:
        assert time.monotonic() < deadline, "the feeder never stored the record"
        time.sleep(0.005)
    ledger.close_sync()


def test_closing_stores_everything_and_leaves_an_empty_journal(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = _held(db)
    for n in range(50):
        run(ledger.record([_event(n)], {f"sha256:{n:064x}": "body " * 50}))
    ledger.close_sync()
    assert _stored(db) == 50
    assert os.path.getsize(journal_path(str(db))) == len(journal.base_frame((50, "x" * 71)))


def test_a_torn_last_frame_is_cut_off_and_everything_before_it_kept(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = _held(db)
    run(ledger.record([_event(1), _event(2)]))
    _killed(ledger)
    with open(journal_path(str(db)), "ab") as f:
        f.write(encode({"entries": [[3, "i", "k", "a", None, None, "{}", "p", "h"]]})[:-5])
    again = SqliteLedger.open(db)
    assert run(again.verify(check_bodies=False)).entries == 2
    run(again.record([_event(3)]))
    report = run(again.verify(check_bodies=False))
    assert report.ok and report.entries == 3, report
    again.close_sync()


def test_a_corrupt_journal_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = _held(db)
    run(ledger.record([_event(1)]))
    run(ledger.record([_event(2)]))
    _killed(ledger)
    path = journal_path(str(db))
    data = bytearray(Path(path).read_bytes())
    data[len(journal.base_frame((0, "x" * 71))) + HEADER.size + 3] ^= 0x20  # the first batch
    Path(path).write_bytes(bytes(data))
    with pytest.raises(LedgerError, match="corrupt"):
        SqliteLedger.open(db)
    assert Path(path).read_bytes() == bytes(data)


def test_ledgers_sharing_a_file_append_in_one_order(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    first, second = SqliteLedger.open(db), SqliteLedger.open(db)
    for n in range(40):
        run((first if n % 3 else second).record([_event(n)]))
    assert [e.turn_id for e in run(second.entries())] == [f"t{n}" for n in range(40)]
    report = run(first.verify(check_bodies=False))
    assert report.ok and report.entries == 40, report
    first.close_sync()
    second.close_sync()


def test_a_rotated_journal_is_followed_by_every_writer(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    first, second = SqliteLedger.open(db), SqliteLedger.open(db)
    for ledger in (first, second):
        _hold_feeder(ledger)
    for n in range(10):
        run(first.record([_event(n)]))
    first.sync()
    assert first._feeder is not None and first._feeder.rotate(blocking=True)
    assert os.path.getsize(journal_path(str(db))) == len(journal.base_frame((10, "x" * 71)))
    for n in range(10, 20):
        run(second.record([_event(n)]))  # second still held the old file: it follows
        run(first.record([_event(n + 100)]))
    report = run(second.verify(check_bodies=False))
    assert report.ok and report.entries == 30, report
    first.close_sync()
    second.close_sync()


def test_records_written_without_the_journal_start_it_again_from_the_database(
        tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    journaled = SqliteLedger.open(db)
    run(journaled.record([_event(1)]))
    journaled.close_sync()
    direct = SqliteLedger.open(db, journal=False)
    run(direct.record([_event(2), _event(3)]))
    direct.close_sync()
    again = SqliteLedger.open(db)
    run(again.record([_event(4)]))
    report = run(again.verify(check_bodies=False))
    assert report.ok and report.entries == 4, report
    again.close_sync()


def test_opening_without_the_journal_stores_what_a_crashed_process_left_in_it(
        tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = _held(db)
    run(ledger.record([_event(1)]))
    _killed(ledger)
    direct = SqliteLedger.open(db, journal=False)
    assert _stored(db) == 1
    run(direct.record([_event(2)]))
    assert run(direct.verify(check_bodies=False)).entries == 2
    direct.close_sync()


def test_a_database_that_cannot_take_the_records_fails_the_next_append_and_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_MS", 50)
    db = tmp_path / "l.db"
    ledger = _held(db)
    run(ledger.record([_event(1)]))
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another program holds SQLite's write lock
    with pytest.raises(LedgerError, match="locked"):
        run(ledger.entries())
    assert ledger._feeder is not None and ledger._feeder.failure is not None
    with pytest.raises(LedgerError, match="locked"):
        run(ledger.record([_event(2)]))  # tried again first, and still failing
    blocker.execute("ROLLBACK")
    blocker.close()
    run(ledger.record([_event(3)]))
    assert [e.turn_id for e in run(ledger.entries())] == ["t1", "t3"]
    assert run(ledger.verify(check_bodies=False)).ok
    ledger.close_sync()


def test_a_database_cut_back_behind_the_journal_is_refused_not_overwritten(
        tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    ledger = _held(db)
    run(ledger.record([_event(1), _event(2)]))
    ledger.sync()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER audit_log_no_delete")
    conn.execute("DELETE FROM audit_log WHERE seq = 2")
    conn.close()
    run(ledger.record([_event(3)]))  # in the journal: entry 3 after an entry 2 SQLite lacks
    with pytest.raises(LedgerError, match="next entry is 3"):
        ledger.sync()
    ledger.close_sync()


def test_a_session_id_with_a_lone_surrogate_is_stored_not_left_in_the_journal(
        tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")
    run(ledger.record([_event(1, session="a\ud800b")]))
    assert [e.session_id for e in run(ledger.entries())] == ["a\ufffdb"]
    assert run(ledger.verify(check_bodies=False)).ok
    ledger.close_sync()


def test_a_large_backlog_is_stored_by_the_appender(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feeder, "LAG_BYTES", 2000)
    db = tmp_path / "l.db"
    ledger = _held(db)
    for n in range(30):
        run(ledger.record([_event(n)], {f"sha256:{n:064x}": "x" * 300}))
    assert 20 <= _stored(db) <= 30  # stored as it passed 2,000 bytes, without a read
    ledger.close_sync()


# -- processes killed while appending ---------------------------------------------

APPENDER = textwrap.dedent("""
    import sys
    from overt.events import TurnStarted
    from overt.ledger.canonical import digest_text
    from overt.ledger.sqlite import SqliteLedger
    ledger = SqliteLedger.open(sys.argv[1])
    n = 0
    while True:
        events = [TurnStarted(turn_id=f"{sys.argv[2]}-{n}-{k}", session_id="s", source="cli",
                              caller_session_id="c", model="m", route="r", max_tool_calls=5,
                              message_digest="sha256:" + "0" * 64) for k in range(3)]
        body = "body " * (n % 50)
        entries = ledger.record_sync(events, {digest_text(body): body})
        print(entries[-1].seq, flush=True)
        n += 1
""")


def test_writers_killed_at_any_moment_lose_no_committed_record(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    script = tmp_path / "appender.py"
    script.write_text(APPENDER)
    committed: set[int] = set()
    for round_, delay in enumerate((0.05, 0.11, 0.2, 0.33)):
        errors = [tmp_path / f"{round_}.{w}.err" for w in range(2)]
        procs = [subprocess.Popen([sys.executable, str(script), str(db), f"{round_}.{w}"],
                                  stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
                 for w, err in enumerate(errors)]
        deadline = time.monotonic() + 60
        first = [p.stdout.readline() for p in procs if p.stdout]  # both are appending
        if not all(first):
            for proc in procs:
                proc.kill()
            pytest.fail("a writer failed: " + " | ".join(e.read_text() for e in errors))
        time.sleep(delay)
        for proc in procs:
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            out, _ = proc.communicate(timeout=30)  # (its stderr: a kill mid-write says nothing)
            committed.update(int(line) for line in [first.pop(0), *out.splitlines()] if line)
        assert time.monotonic() < deadline
        ledger = SqliteLedger.open(db)
        report = run(ledger.verify(check_bodies=False))
        assert report.ok, report
        stored = {e.seq for e in run(ledger.entries())}
        assert committed <= stored  # every batch a writer was told is recorded, is
        ledger.close_sync()
