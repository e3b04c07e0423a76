"""A process killed mid-turn leaves a ledger that verifies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from overt.ledger.sqlite import SqliteLedger
from tests.conftest import run

CHILD = textwrap.dedent("""
    import asyncio, sys, pathlib
    from overt.ledger.sqlite import SqliteLedger
    from overt.models.fake import ScriptedModel
    from overt.runtime import Runtime
    from overt.tools.base import tool
    from overt.types import IncomingMessage

    db, ready, turns = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])

    @tool
    async def effect(n: int) -> str:
        "An effect that, on the last turn, hangs until the process is killed."
        if n == turns - 1:
            ready.write_text("in tool")
            await asyncio.sleep(3600)
        return "done"

    async def main():
        replies = []
        for n in range(turns):
            replies += [{"tool_calls": [{"name": "effect", "arguments": {"n": n}}]}, "ok"]
        rt = Runtime(model=ScriptedModel(replies), ledger=SqliteLedger.open(db), tools=[effect])
        for n in range(turns):
            await rt.respond(IncomingMessage("cli", f"turn {n}", {"session_id": "crash"}))

    asyncio.run(main())
""")


def _start(tmp_path: Path, turns: int) -> tuple[subprocess.Popen[bytes], Path, Path]:
    db, ready = tmp_path / "ledger.db", tmp_path / "ready"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(ready), str(turns)])
    return proc, db, ready


def test_a_process_killed_inside_a_tool_leaves_a_verifiable_ledger_with_the_intent(
    tmp_path: Path,
) -> None:
    proc, db, ready = _start(tmp_path, turns=3)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, "child exited early"
        assert time.monotonic() < deadline, "child never reached the tool"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ledger = SqliteLedger.open(db)
    report = ledger.verify_sync()
    assert report.ok, report
    kinds = [e.kind for e in run(ledger.entries())]
    assert kinds.count("turn.completed") == 2
    assert kinds[-1] == "tool_call.started"  # the intent of the interrupted effect
    ledger.close_sync()


def test_processes_killed_at_arbitrary_moments_never_leave_a_broken_chain(
    tmp_path: Path,
) -> None:
    seen = 0
    for delay in (0.0, 0.013, 0.031, 0.057):
        proc, db, _ = _start(tmp_path, turns=100_000)
        deadline = time.monotonic() + 60
        while not (db.exists() and db.stat().st_size > 0 and _entries(db) > seen):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.005)
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        ledger = SqliteLedger.open(db)
        report = ledger.verify_sync()
        ledger.close_sync()
        assert report.ok, report
        assert report.entries > seen
        seen = report.entries


def _entries(db: Path) -> int:
    import sqlite3

    try:
        return int(sqlite3.connect(db).execute("SELECT count(*) FROM audit_log").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
