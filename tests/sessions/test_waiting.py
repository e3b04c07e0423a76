"""A turn paused for an approval is part of its session: a follow-up before anyone
decides is answered knowing of the request that waits, and of its decision once made;
the turn's answer then replaces what waited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overt.ledger import open_ledger
from overt.models.fake import ScriptedModel
from overt.policy.actors import Actor
from overt.runtime import Runtime
from overt.sessions import HistoryReader, session_history
from overt.types import Message, ModelRequest
from tests.conftest import cli_message, run
from tests.policy.helpers import effect_tools, runs_of

LOOKUP_THEN_PAY = {"tool_calls": [
    {"name": "lookup", "arguments": {"query": "bob's account"}},
    {"name": "send_payment", "arguments": {"amount": 500, "to": "bob"}}]}


def history(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role != "system"]


def test_a_follow_up_sees_the_request_that_waits_then_its_decision_then_its_answer(
    ledger_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "payments"
    model = ScriptedModel([LOOKUP_THEN_PAY, "It is still waiting for approval.",
                           "It was approved and is running.", "Paid bob $5.",
                           "You paid bob $5."])
    runtime = Runtime(model=model, ledger=open_ledger(ledger_url), tools=effect_tools(log))
    try:
        paused = run(runtime.respond(cli_message("pay bob 5 dollars", session="pay")))
        request_id = paused.awaiting_approval
        assert request_id is not None and runs_of(log) == []

        run(runtime.respond(cli_message("any news?", session="pay")))
        shown = history(model.requests[1])
        assert [m.role for m in shown] == ["user", "assistant", "tool", "assistant", "user"]
        assert shown[0].content == "pay bob 5 dollars"
        assert shown[1].tool_calls[0].name == "lookup" and shown[2].content == "nothing found"
        waiting = shown[3].content
        assert "waiting for an operator's approval" in waiting
        assert "send_payment" in waiting and request_id in waiting
        assert "has not run" in waiting
        assert shown[4].content == "any news?"

        # decided by another process, not yet taken up: the follow-up reads the decision
        other = Runtime(model=ScriptedModel([]), ledger=open_ledger(ledger_url),
                        tools=effect_tools(log))
        run(other.approvals.decide(request_id, "approved", by=Actor.operator()))
        run(other.close())
        run(runtime.respond(cli_message("and now?", session="pay")))
        shown = history(model.requests[2])
        assert [m.content for m in shown if m.role == "user"] == [
            "pay bob 5 dollars", "any news?", "and now?"]
        assert f"An operator approved approval request {request_id}" in shown[3].content
        assert "waiting for an operator's approval" not in " ".join(m.content for m in shown)

        assert [r.result.text for r in run(runtime.resume_decided(settled_s=0))] == [
            "Paid bob $5."]
        assert runs_of(log) == ["500 bob"]
        run(runtime.respond(cli_message("what did you pay?", session="pay")))
        shown = history(model.requests[4])
        first = shown[:6]
        assert [m.role for m in first] == ["user", "assistant", "tool", "assistant", "tool",
                                           "assistant"]
        assert first[3].tool_calls[0].name == "send_payment"
        assert first[4].content == "sent 500 to bob" and first[5].content == "Paid bob $5."
        assert not any("approval request" in m.content for m in shown)
    finally:
        run(runtime.close())


def test_a_reader_that_held_the_session_and_a_whole_read_agree_at_each_step(
    ledger_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "payments"
    ledger = open_ledger(ledger_url)
    runtime = Runtime(model=ScriptedModel([LOOKUP_THEN_PAY, "Denied, so nothing was paid."]),
                      ledger=ledger, tools=effect_tools(log))
    reader = HistoryReader(ledger)

    def both() -> list[Any]:
        held = run(reader.history("cli:pay"))
        whole = run(session_history(ledger, "cli:pay"))
        assert [t.messages for t in held] == [t.messages for t in whole]
        return whole

    try:
        assert both() == []
        request_id = run(runtime.respond(cli_message("pay bob", session="pay"))) \
            .awaiting_approval
        (turn,) = both()
        assert "waiting for an operator's approval" in turn.messages[-1].content
        resumed = run(runtime.deny(request_id, reason="not this week"))
        assert resumed.result.text == "Denied, so nothing was paid."
        (turn,) = both()
        assert turn.messages[-1] == Message("assistant", "Denied, so nothing was paid.")
        assert turn.messages[-2].is_error  # the held call, refused
        assert runs_of(log) == []
    finally:
        run(runtime.close())


def test_a_turn_held_then_expired_says_so_until_it_is_answered(
    ledger: Any, tmp_path: Path
) -> None:
    runtime = Runtime(model=ScriptedModel([LOOKUP_THEN_PAY]), ledger=ledger,
                      tools=effect_tools(tmp_path / "payments"))
    try:
        request_id = run(runtime.respond(cli_message("pay bob", session="pay"))) \
            .awaiting_approval
        run(runtime.approvals.decide(request_id, "expired", by=Actor.operator()))
        (turn,) = run(session_history(ledger, "cli:pay"))
        assert turn.messages[-1].content.startswith(f"(Approval request {request_id} expired")
    finally:
        run(runtime.close())
