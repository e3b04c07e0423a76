"""The engine records a turn's reasoning steps, linked, in the records' own commits."""

from __future__ import annotations

from typing import Any

from overt.events import PolicyDecided, ToolCallCompleted
from overt.models.fake import ScriptedModel
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.reasoning.trail import build_trail
from overt.tools.base import tool
from overt.types import ModelResponse, ToolCall
from tests.conftest import RuntimeFactory, cli_message, run

GATE = Gate(Policy([
    Rule("no-deletes", "deny", "mutating_denied", "deleting mail needs a person",
         priority=10, tools=("delete_mail",)),
    Rule("open", "allow", "open")]))


@tool(read_only=True)
def check_credits() -> str:
    """Credits left."""
    return "$2.50 remaining"


@tool(read_only=True)
def check_inbox() -> str:
    """Unread mail."""
    return "3 unprocessed messages"


@tool
def delete_mail() -> str:
    """Delete old mail."""
    return "deleted"


@tool(read_only=True)
def fetch_url() -> str:
    """Always fails."""
    raise RuntimeError("connection reset")


def steps(ledger: Any, turn_id: str) -> list[tuple[int, str, str | None, str | None,
                                                    str | None]]:
    return [(s.step_number, s.phase, s.content, s.tool_call_id, s.policy_decision_id)
            for _, s in run(build_trail(ledger, turn_id=turn_id)).steps()]


def test_thinking_two_calls_a_denial_and_an_error_give_the_expected_linked_steps(
        make_runtime: RuntimeFactory, ledger: Any) -> None:
    model = ScriptedModel([
        ModelResponse("I'll check both.", (ToolCall("c1", "check_credits", {}),
                                           ToolCall("c2", "check_inbox", {})),
                      reasoning="The user wants a status.\nPlan:\n1. check_credits\n"
                                "2. check_inbox"),
        ModelResponse("<think>Old mail should go.</think>Deleting old mail.",
                      (ToolCall("c3", "delete_mail", {}), ToolCall("c4", "fetch_url", {}))),
        "Here is your status."])
    rt = make_runtime(model, [check_credits, check_inbox, delete_mail, fetch_url], gate=GATE)
    result = run(rt.respond(cli_message("status?")))
    assert result.error is None
    decision = run(ledger.entries(kinds=["policy.decision"]))
    denied = next(d.decision_id for d in (e.event(PolicyDecided) for e in decision)
                  if d.effect == "deny")
    c1, c2, c3, c4 = [e.event(ToolCallCompleted).tool_call_id
                      for e in run(ledger.entries(kinds=["tool_call.completed"]))]
    assert all(c.startswith("call_") for c in (c1, c2, c3, c4))  # overt's ids, not the model's
    assert steps(ledger, result.turn_id) == [
        (0, "thinking", "The user wants a status.", None, None),
        (1, "plan", "Plan:\n1. check_credits\n2. check_inbox", None, None),
        (2, "thinking", "I'll check both.", None, None),
        (3, "execute", "check_credits -> ok, $2.50 remaining", c1, None),
        (4, "execute", "check_inbox -> ok, 3 unprocessed messages", c2, None),
        (5, "thinking", "Old mail should go.", None, None),
        (6, "thinking", "Deleting old mail.", None, None),
        (7, "waiting_approval", "delete_mail denied by policy (mutating_denied): deleting "
         "mail needs a person", c3, denied),
        (8, "error", "fetch_url -> execution_error, tool_execution_error: RuntimeError: connection "
         "reset", c4,
         None),
    ]
    entries = run(ledger.entries(kinds=["reasoning.step", "tool_call.completed",
                                        "policy.decision"]))
    at = {(e.kind, getattr(e.event(), "tool_call_id", None)): e.at for e in entries}
    assert at[("reasoning.step", c1)] == at[("tool_call.completed", c1)]
    assert run(ledger.verify()).ok


def test_a_model_failure_is_an_error_step(make_runtime: RuntimeFactory, ledger: Any) -> None:
    result = run(make_runtime(ScriptedModel([RuntimeError("down")])).respond(cli_message()))
    assert steps(ledger, result.turn_id) == [
        (0, "error", "model_error: RuntimeError: down", None, None)]
