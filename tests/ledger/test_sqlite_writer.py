"""SQLite's writer thread: group commit, a batch that fails fails alone, each caller
answered only once its records are committed, processes killed mid-append lose
nothing committed, and no read blocks the event loop."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from overt.errors import LedgerConflict, LedgerError
from overt.events import ApprovalDecided, TurnStarted
from overt.ledger.canonical import digest_text
from overt.ledger.sqlite import SqliteLedger
from tests.conftest import run


def _started(n: int, session: str = "s") -> TurnStarted:
    return TurnStarted(turn_id=f"t{n}", session_id=session, source="cli",
                       caller_session_id="cli:s", model="scripted", route="default",
                       max_tool_calls=5,
                       actor="operator:default", message_digest=digest_text(f"m{n}"))


def _decided(request: str) -> ApprovalDecided:
    return ApprovalDecided(turn_id="t", session_id="s", claim=request, request_id=request,
                           decision="approved", decided_by="op", reason_digest=None,
                           tool_call_id="c", tool_name="send")


def _in_file(db: Path) -> int:
    """Entries in the SQLite file, as a program other than overt reads it."""
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM audit_log").fetchone()[0])
    finally:
        conn.close()


def test_a_record_is_in_the_file_when_record_returns(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")
    for n in range(3):
        ledger.record_sync([_started(n)], {digest_text(f"m{n}"): f"m{n}"})
        assert _in_file(tmp_path / "l.db") == n + 1
    ledger.close_sync()


def test_concurrent_records_share_commits_and_keep_one_chain(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")

    async def many() -> list[int]:
        batches = await asyncio.gather(*[ledger.record([_started(n), _started(n)])
                                         for n in range(200)])
        return [e.seq for batch in batches for e in batch]

    seqs = run(many())
    assert sorted(seqs) == list(range(1, 401))
    ats = {e.at for e in run(ledger.entries())}
    assert len(ats) < 200  # some batches were committed together
    assert run(ledger.verify(check_bodies=False)).ok
    ledger.close_sync()


def test_a_taken_claim_fails_its_batch_alone_in_a_shared_commit(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")

    async def racing() -> list[object]:
        return await asyncio.gather(
            ledger.record([_started(1)]), ledger.record([_decided("r1")]),
            ledger.record([_decided("r1")]), ledger.record([_started(2)]),
            return_exceptions=True)

    results = run(racing())
    conflicts = [r for r in results if isinstance(r, LedgerConflict)]
    assert len(conflicts) == 1 and sum(isinstance(r, list) for r in results) == 3
    assert run(ledger.count("turn.started")) == 2 and run(ledger.count("approval.decided")) == 1
    assert run(ledger.verify(check_bodies=False)).ok
    ledger.close_sync()


def test_a_batch_the_database_refuses_fails_alone(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")

    async def mixed() -> list[object]:
        return await asyncio.gather(
            ledger.record([_started(1)]),
            ledger.record([_started(2)], rows=[("no_such_table", {"a": 1})]),
            ledger.record([_started(3)]), return_exceptions=True)

    first, refused, third = run(mixed())
    assert isinstance(refused, LedgerError) and "no such table" in str(refused)
    assert isinstance(first, list) and isinstance(third, list)
    assert [e.turn_id for e in run(ledger.entries())] == ["t1", "t3"]
    assert run(ledger.verify(check_bodies=False)).ok
    ledger.close_sync()


@pytest.mark.slow
def test_reads_run_off_the_event_loop(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")
    ledger.record_sync([_started(n) for n in range(2000)])
    ticks = 0

    async def tick(done: asyncio.Event) -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    async def read_while_ticking() -> int:
        done = asyncio.Event()
        ticker = asyncio.create_task(tick(done))
        await asyncio.sleep(0)
        before = ticks
        for _ in range(20):
            await ledger.verify()
        done.set()
        await ticker
        return ticks - before

    assert run(read_while_ticking()) > 20  # the loop ran while every verify did
    ledger.close_sync()


def test_a_closed_ledger_refuses_reads_and_writes(tmp_path: Path) -> None:
    ledger = SqliteLedger.open(tmp_path / "l.db")
    ledger.close_sync()
    with pytest.raises(LedgerError, match="closed"):
        ledger.record_sync([_started(1)])
    with pytest.raises(LedgerError, match="closed"):
        run(ledger.count("turn.started"))


def test_memory_is_a_private_file_removed_on_close() -> None:
    ledger = SqliteLedger.open(":memory:")
    ledger.record_sync([_started(1)])
    assert run(ledger.count("turn.started")) == 1
    ledger.close_sync()
    assert not Path(ledger.path).exists()


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
                              message_digest="sha256:" + "0" * 64, actor="operator:default")
                  for k in range(3)]
        body = "body " * (n % 50)
        entries = ledger.record_sync(events, {digest_text(body): body})
        print(entries[-1].seq, flush=True)
        n += 1
""")


@pytest.mark.slow
def test_writers_killed_at_any_moment_lose_no_committed_record(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    script = tmp_path / "appender.py"
    script.write_text(APPENDER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    committed: set[int] = set()
    for round_, delay in enumerate((0.05, 0.11, 0.2, 0.33)):
        errors = [tmp_path / f"{round_}.{w}.err" for w in range(2)]
        procs = [subprocess.Popen([sys.executable, str(script), str(db), f"{round_}.{w}"],
                                  stdout=subprocess.PIPE, stderr=err.open("w"), text=True,
                                  env=env)
                 for w, err in enumerate(errors)]
        first = [p.stdout.readline() for p in procs if p.stdout]  # both are appending
        if not all(first):
            for proc in procs:
                proc.kill()
            pytest.fail("a writer failed: " + " | ".join(e.read_text() for e in errors))
        time.sleep(delay)  # a kill at some moment into the appends, not a wait for an event
        for proc in procs:
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            out, _ = proc.communicate(timeout=30)
            committed.update(int(line) for line in [first.pop(0), *out.splitlines()] if line)
        ledger = SqliteLedger.open(db)
        report = run(ledger.verify(check_bodies=False))
        assert report.ok, report
        stored = {e.seq for e in run(ledger.entries())}
        assert committed <= stored  # every batch a writer was told is recorded, is
        ledger.close_sync()
