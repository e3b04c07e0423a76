"""An approved call is never dropped silently: one whose tool started and never
recorded a result (its process died inside the tool) shows in `approvals list` and
`get_operational_state`; `approvals resume` runs it again only if the tool is
idempotent, and otherwise holds it for the operator with its start record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from overt.cli import approvals_cmd
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.tools.base import Tool, tool
from overt.tools.builtin import builtin_tools
from tests.conftest import run
from tests.policy.helpers import ask


class Died(BaseException):
    """The process dying inside the tool (nothing after it runs)."""


def store(log: Path, *, idempotent: bool, die: bool) -> Tool:
    @tool(idempotent=idempotent)
    def set_value(value: int) -> str:
        """Set the value (mutating: needs an approval)."""
        with log.open("a", encoding="utf-8") as f:
            f.write(f"{value}\n")
        if die:
            raise Died()
        return f"set to {value}"

    return set_value


SET = {"tool_calls": [{"name": "set_value", "arguments": {"value": 7}}]}


def runtime(ledger: Ledger, tools: list[Tool], replies: list[Any]) -> Runtime:
    return Runtime(model=ScriptedModel(replies), ledger=ledger, tools=tools,
                   gate=Gate(Policy([]), Capabilities(None), approval_ttl_s=3600.0))


def interrupted(ledger: Ledger, log: Path, *, idempotent: bool) -> str:
    """A request approved whose tool started, wrote its effect and died."""
    rt = runtime(ledger, [store(log, idempotent=idempotent, die=True)], [SET])
    request_id = ask(rt).awaiting_approval
    with pytest.raises(Died):
        run(rt.approve(request_id))
    assert log.read_text().splitlines() == ["7"]
    return str(request_id)


def test_an_interrupted_approved_call_is_visible_in_the_list_and_operational_state(
        ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "values"
    request_id = interrupted(ledger, log, idempotent=False)
    later = runtime(ledger, [store(log, idempotent=False, die=False), *builtin_tools()], [])
    (request,) = [r for r in run(later.approvals.list()) if r.request_id == request_id]
    assert request.status == "approved" and request.interrupted
    assert request.call_started_seq is not None and not request.call_completed

    class Args:
        approvals_command, all, json = "list", False, False

    assert run(approvals_cmd.run(Args(), later)) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert request_id in out and "no result recorded" in out
    state = run(later.call_tool("get_operational_state", {}))
    assert not state.is_error, state.content
    (seen,) = json.loads(state.content)["interrupted_approved_calls"]
    assert seen == {"request_id": request_id, "tool_name": "set_value",
                    "started_seq": request.call_started_seq}


def test_resume_holds_an_interrupted_call_of_a_tool_not_idempotent_and_never_runs_it_twice(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "values"
    request_id = interrupted(ledger, log, idempotent=False)
    later = runtime(ledger, [store(log, idempotent=False, die=False)], ["done"])
    for _ in range(2):
        (held,) = run(later.resume_pending())
        assert held.request.request_id == request_id and held.released is None
        assert held.held_call is not None and held.held_call.kind == "tool_call.started"
        assert held.held_call.seq == held.request.call_started_seq
    assert log.read_text().splitlines() == ["7"]  # ran once, before the process died


def test_resume_runs_an_interrupted_call_of_an_idempotent_tool_again_once(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "values"
    request_id = interrupted(ledger, log, idempotent=True)
    later = runtime(ledger, [store(log, idempotent=True, die=False)], ["done"])
    (again,) = run(later.resume_pending())
    assert again.released is not None and again.released.status == "ok"
    assert log.read_text().splitlines() == ["7", "7"]
    (request,) = [r for r in run(later.approvals.list()) if r.request_id == request_id]
    assert request.call_completed and not request.interrupted
    assert run(later.resume_pending()) == []
    assert log.read_text().splitlines() == ["7", "7"]
    assert run(ledger.verify()).ok


def test_a_paused_turn_whose_interrupted_call_ran_again_is_closed_as_interrupted(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "values"
    request_id = interrupted(ledger, log, idempotent=True)
    later = runtime(ledger, [store(log, idempotent=True, die=False)], ["done"])
    (again,) = run(later.resume_pending())
    turn_id = again.request.turn_id
    (completed,) = run(ledger.entries(turn_id=turn_id, kinds=["turn.completed"]))
    assert completed.data["status"] == "interrupted"
    assert completed.data["tools_used"] == ["set_value"]
    assert run(later.resume_pending()) == []
    (request,) = [r for r in run(later.approvals.list()) if r.request_id == request_id]
    assert request.call_completed
    assert run(ledger.verify()).ok


def test_an_approval_taken_up_whose_call_never_started_is_visible_as_such(
        ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from overt.engine.record import resumption
    from overt.policy.actors import Actor

    log = tmp_path / "values"
    rt = runtime(ledger, [store(log, idempotent=False, die=False), *builtin_tools()], [SET])
    result = ask(rt)
    request_id = str(result.awaiting_approval)
    run(rt.approvals.decide(request_id, "approved", by=Actor.operator("default")))
    # the process that took it up stopped right after its claim, before the tool ran
    run(ledger.record([resumption(result.turn_id, result.session_id, request_id, "approved",
                                  "operator:default")]))
    (request,) = [r for r in run(rt.approvals.list()) if r.request_id == request_id]
    assert request.unstarted and not request.interrupted
    assert not log.exists()

    class Args:
        approvals_command, all, json = "list", False, False

    assert run(approvals_cmd.run(Args(), rt)) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert request_id in out and "its call never started" in out
    state = json.loads(run(rt.call_tool("get_operational_state", {})).content)
    assert state["unstarted_approved_calls"] == [
        {"request_id": request_id, "tool_name": "set_value",
         "taken_up_seq": request.taken_up_seq}]


def test_an_approval_taken_up_and_finished_is_not_unstarted(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "values"
    rt = runtime(ledger, [store(log, idempotent=False, die=False)], [SET, "done"])
    request_id = str(ask(rt).awaiting_approval)
    run(rt.approve(request_id))
    (request,) = [r for r in run(rt.approvals.list()) if r.request_id == request_id]
    assert request.taken_up_seq is not None
    assert not request.unstarted and not request.interrupted


def test_a_process_starting_beside_others_leaves_an_interrupted_call_to_the_operator(
        ledger: Ledger, tmp_path: Path) -> None:
    """``resume_pending(interrupted=False)`` (what ``overt serve`` runs as it starts):
    a call with no result may be running in another worker, so it is not run again;
    the operator's ``approvals resume`` still takes it up."""
    log = tmp_path / "values"
    request_id = interrupted(ledger, log, idempotent=True)
    later = runtime(ledger, [store(log, idempotent=True, die=False)], ["done"])
    assert run(later.resume_pending(interrupted=False)) == []
    assert log.read_text().splitlines() == ["7"]
    (request,) = [r for r in run(later.approvals.list()) if r.request_id == request_id]
    assert request.interrupted
    (again,) = run(later.resume_pending())
    assert again.released is not None and again.released.status == "ok"
    assert log.read_text().splitlines() == ["7", "7"]


_DIES_INSIDE_THE_TOOL = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from overt.ledger import open_ledger
    from overt.tools.base import tool
    from tests.conftest import run
    from tests.policy.helpers import ask
    from tests.policy.test_interrupted import SET, runtime

    log = Path(sys.argv[2])

    @tool(idempotent=True)
    def set_value(value: int) -> str:
        \"\"\"Set the value (mutating: needs an approval).\"\"\"
        with log.open("a", encoding="utf-8") as f:
            f.write(f"{value}\\n")
        os._exit(3)  # the process dies inside the tool: nothing after it runs

    rt = runtime(open_ledger(sys.argv[1]), [set_value], [SET])
    run(rt.approve(str(ask(rt).awaiting_approval)))
""")


@pytest.mark.slow
def test_a_process_starting_takes_up_a_call_whose_process_on_this_host_has_ended(
        ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    """A worker starting (``interrupted=False``) runs an idempotent call again when
    the process that ran it was on this host and is gone: a single ``overt serve``
    restarted after a crash recovers on its own."""
    log = tmp_path / "values"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    child = subprocess.run([sys.executable, "-c", _DIES_INSIDE_THE_TOOL, ledger_url, str(log)],
                           env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert child.returncode == 3, child.stderr
    assert log.read_text().splitlines() == ["7"]
    later = runtime(ledger, [store(log, idempotent=True, die=False)], ["done"])
    (request,) = [r for r in run(later.approvals.list()) if r.interrupted]
    assert request.taken_up_by is not None and request.taken_up_by[0] != os.getpid()
    (again,) = run(later.resume_pending(interrupted=False))
    assert again.released is not None and again.released.status == "ok"
    assert log.read_text().splitlines() == ["7", "7"]


def test_an_interrupted_direct_call_is_held_with_its_start_record_found_by_its_id(
        ledger: Ledger, tmp_path: Path) -> None:
    """A request outside a turn: its call's start record is found by the call's id
    (``Ledger.direct_calls``), not among every call of the ledger."""
    log = tmp_path / "values"
    rt = runtime(ledger, [store(log, idempotent=False, die=True)], [])
    held = run(rt.call_tool("set_value", {"value": 9}))
    assert held.status == "held" and held.request_id
    with pytest.raises(Died):
        run(rt.approve(held.request_id))
    later = runtime(ledger, [store(log, idempotent=False, die=False)], [])
    (taken,) = run(later.resume_pending())
    assert taken.request.turn_id is None and taken.request.interrupted
    assert taken.held_call is not None and taken.held_call.kind == "tool_call.started"
    assert taken.held_call.seq == taken.request.call_started_seq
    assert taken.held_call.data["tool_call_id"] == taken.request.tool_call_id
    assert log.read_text().splitlines() == ["9"]
