"""A process killed mid-turn leaves a ledger that verifies, on both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from overt.ledger import open_ledger
from tests.backends import Raw
from tests.conftest import run

CHILD = textwrap.dedent("""
    import asyncio, sys, pathlib
    from overt.ledger import open_ledger
    from overt.models.fake import ScriptedModel
    from overt.policy.engine import Policy
    from overt.policy.gate import Gate
    from overt.policy.rules import Rule
    from overt.runtime import Runtime
    from overt.tools.base import tool
    from overt.types import IncomingMessage

    url, ready, turns = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])

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
        rt = Runtime(model=ScriptedModel(replies), ledger=open_ledger(url), tools=[effect],
                     gate=Gate(Policy([Rule("effects", "allow", "test")])))
        for n in range(turns):
            await rt.respond(IncomingMessage("cli", f"turn {n}", {"session_id": "crash"}))

    asyncio.run(main())
""")


def _start(tmp_path: Path, url: str, turns: int) -> tuple[subprocess.Popen[bytes], Path]:
    ready = tmp_path / f"ready-{time.monotonic_ns()}"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), url, str(ready), str(turns)])
    return proc, ready


def _entries(url: str) -> int:
    try:
        raw = Raw(url)
        try:
            return int(raw.query("SELECT count(*) FROM audit_log")[0][0])
        finally:
            raw.close()
    except Exception:  # noqa: BLE001 - the child has not created the schema yet
        return 0


@pytest.mark.slow
def test_a_process_killed_inside_a_tool_leaves_a_verifiable_ledger_with_the_intent(
    tmp_path: Path, ledger_url: str,
) -> None:
    proc, ready = _start(tmp_path, ledger_url, turns=3)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, "child exited early"
        assert time.monotonic() < deadline, "child never reached the tool"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ledger = open_ledger(ledger_url)
    report = run(ledger.verify())
    assert report.ok, report
    kinds = [e.kind for e in run(ledger.entries())]
    assert kinds.count("turn.completed") == 2
    assert kinds[-1] == "tool_call.started"  # the intent of the interrupted effect
    run(ledger.close())


@pytest.mark.slow
def test_processes_killed_at_arbitrary_moments_never_leave_a_broken_chain(
    tmp_path: Path, ledger_url: str,
) -> None:
    seen = 0
    for delay in (0.0, 0.013, 0.031, 0.057):
        proc, _ = _start(tmp_path, ledger_url, turns=100_000)
        deadline = time.monotonic() + 60
        while _entries(ledger_url) <= seen:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.005)
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        ledger = open_ledger(ledger_url)
        report = run(ledger.verify())
        run(ledger.close())
        assert report.ok, report
        assert report.entries > seen
        seen = report.entries
