"""Approvals across processes: two racing approvers run the call once; a turn paused by
a process that was killed is resumed by a new one. Real processes, both backends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from overt.ledger.base import Ledger
from tests.conftest import run
from tests.policy.helpers import runs_of

CHILD = textwrap.dedent("""
    import asyncio, json, pathlib, sys, time
    sys.path.insert(0, sys.argv[1])
    from overt.errors import ApprovalError
    from overt.ledger import open_ledger
    from overt.types import IncomingMessage
    from tests.policy.helpers import PAY, runtime

    root, url, log, role, arg = sys.argv[1:6]
    log = pathlib.Path(log)

    async def main():
        if role == "ask":
            rt = runtime(open_ledger(url), log, [PAY])
            result = await rt.respond(IncomingMessage("cli", "pay bob", {"session_id": "p"}))
            pathlib.Path(arg).write_text(result.awaiting_approval)
            await asyncio.sleep(3600)  # killed here, paused turn and all
        go = pathlib.Path(arg + ".go")
        rt = runtime(open_ledger(url), log, ["Paid bob."])
        await rt.start()
        while not go.exists():  # both approvers start together
            time.sleep(0.001)
        try:
            resumed = await rt.approve(role)
        except ApprovalError as exc:
            print(json.dumps({"refused": str(exc)}), flush=True)
        else:
            print(json.dumps({"status": resumed.request.status,
                              "text": resumed.result.text if resumed.result else None}),
                  flush=True)
        await rt.close()

    asyncio.run(main())
""")
ROOT = str(Path(__file__).resolve().parents[2])


def _child(tmp_path: Path, url: str, log: Path, role: str, arg: str) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    if not script.exists():  # once: rewriting it truncates it, and a child started before
        script.write_text(CHILD)  # that read it then ran an empty script (exit 0, silent)
    return subprocess.Popen([sys.executable, "-X", "faulthandler", str(script), ROOT, url,
                             str(log), role, arg],
                            stdout=subprocess.PIPE, text=True)


def _paused_by_a_killed_process(tmp_path: Path, url: str, log: Path) -> str:
    out = tmp_path / "request"
    asker = _child(tmp_path, url, log, "ask", str(out))
    try:
        for _ in range(3000):
            if out.exists() and out.read_text():
                break
            try:
                asker.wait(timeout=0.01)
            except subprocess.TimeoutExpired:
                continue
            raise AssertionError("the asking process ended before pausing")
        else:
            raise AssertionError("the turn did not pause")
    finally:
        asker.send_signal(signal.SIGKILL)
        asker.wait()
    return out.read_text()


@pytest.mark.slow
def test_an_approval_resumes_a_turn_whose_process_was_killed(
        ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    request_id = _paused_by_a_killed_process(tmp_path, ledger_url, log)
    (tmp_path / "go.go").write_text("")
    approver = _child(tmp_path, ledger_url, log, request_id, str(tmp_path / "go"))
    out, _ = approver.communicate(timeout=120)
    assert json.loads(out) == {"status": "approved", "text": "Paid bob."}
    assert runs_of(log) == ["500 bob"]
    turn = run(ledger.entries(kinds=["turn.completed"]))
    assert [e.data["status"] for e in turn] == ["completed"]
    assert run(ledger.verify()).ok


@pytest.mark.slow
def test_two_processes_racing_to_approve_run_the_call_once(
        ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    request_id = _paused_by_a_killed_process(tmp_path, ledger_url, log)
    go = tmp_path / "go"
    approvers = [_child(tmp_path, ledger_url, log, request_id, str(go)) for _ in range(2)]
    (tmp_path / "go.go").write_text("")
    answers = sorted((json.loads(p.communicate(timeout=120)[0]) for p in approvers),
                     key=lambda a: "refused" in a)
    assert answers[0] == {"status": "approved", "text": "Paid bob."}
    assert "already approved" in answers[1]["refused"]
    assert runs_of(log) == ["500 bob"]
    assert len(run(ledger.entries(kinds=["turn.resumed"]))) == 1
    assert len(run(ledger.entries(kinds=["tool_call.started"]))) == 1
    assert run(ledger.verify()).ok
