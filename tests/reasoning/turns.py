"""Turns recorded as the engine records them, for the reasoning tests: a Recorder,
TurnSteps, and the events around the steps, committed in the same batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from overt.engine.record import Recorder
from overt.events import (
    ApprovalDecided,
    ApprovalRequested,
    PolicyDecided,
    PolicyEffect,
    ToolCallCompleted,
    ToolCallStarted,
    ToolStatus,
    TurnCompleted,
    TurnPaused,
    TurnResumed,
    TurnStarted,
)
from overt.ids import new_ulid
from overt.reasoning.steps import TurnSteps, next_step_number


@dataclass
class Recorded:
    turn_id: str
    session_id: str
    decision_ids: list[str] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)


def started(rec: Recorder, turn_id: str, session_id: str, text: str) -> TurnStarted:
    return TurnStarted(turn_id=turn_id, session_id=session_id, source="cli",
                       caller_session_id=session_id, message_digest=rec.content(text),
                       model="scripted", route="default", max_tool_calls=5,
                       actor="operator:default")


def completed(rec: Recorder, turn_id: str, session_id: str, status: Any = "completed",
              tools: int = 0) -> TurnCompleted:
    return TurnCompleted(turn_id=turn_id, session_id=session_id, status=status,
                         reply_digest=rec.content("done"), tools_used=[], tool_calls=tools,
                         model_calls=1, input_tokens=0, output_tokens=0, cost_usd=0.0,
                         duration_ms=1.0)


def call_done(rec: Recorder, turn_id: str, session_id: str, call_id: str, name: str,
              status: ToolStatus, result: str, reason: str | None = None) -> ToolCallCompleted:
    return ToolCallCompleted(turn_id=turn_id, session_id=session_id, tool_call_id=call_id,
                             tool_name=name, triggered_by="cli", caller_session_id=session_id,
                             tool_status=status, tool_duration_ms=1.5,
                             exc_type=None if status == "ok" else "RuntimeError",
                             args_sha256=rec.content("{}"), result_digest=rec.content(result),
                             reason_code=reason)


def decided(turn_id: str, session_id: str, call_id: str, name: str, effect: PolicyEffect,
            reason: str) -> PolicyDecided:
    return PolicyDecided(turn_id=turn_id, session_id=session_id, decision_id=new_ulid(),
                         tool_call_id=call_id, tool_name=name, effect=effect,
                         reason_code=reason, message=f"{name} is not allowed unattended",
                         rule="no-unattended-writes", rules_evaluated=["no-unattended-writes"],
                         args_sha256="sha256:" + "0" * 64, actor="cli:user", source="cli",
                         route="default", mutating=True, capability="mail.write",
                         capability_granted=True)


async def thinking_two_calls_a_denial_and_an_error(ledger: Any, session_id: str = "s1",
                                                   question: str = "status?") -> Recorded:
    """One turn: thinking with a plan, two tool calls that succeed, a call the
    policy denies, a call that fails, and a final answer."""
    rec = Recorder(ledger, [])
    turn_id = new_ulid()
    steps = TurnSteps(rec, turn_id, session_id)
    rec.add(started(rec, turn_id, session_id, question))
    steps.model_reasoning("I'll call both tools.",
                          "The user wants a status.\nPlan:\n1. check_credits\n2. check_inbox")
    await rec.flush()
    for call_id, name, result in (("tc1", "check_credits", "$2.50 remaining"),
                                  ("tc2", "check_inbox", "3 unprocessed messages")):
        rec.add(ToolCallStarted(turn_id=turn_id, session_id=session_id, tool_call_id=call_id,
                                tool_name=name, triggered_by="cli", caller_session_id=session_id,
                                args_sha256=rec.content("{}")))
        await rec.flush()
        rec.add(call_done(rec, turn_id, session_id, call_id, name, "ok", result))
        steps.executed(call_id, name, "ok", result)
    steps.model_reasoning("<think>Old mail should go.</think>Deleting old mail.", "")
    denial = decided(turn_id, session_id, "tc3", "delete_mail", "deny", "mutating_denied")
    rec.add(denial)
    steps.held("delete_mail", denial.reason_code, denial.message, denial.decision_id,
               tool_call_id="tc3", effect="deny")
    rec.add(call_done(rec, turn_id, session_id, "tc3", "delete_mail", "not_allowed",
                      "not allowed", reason="mutating_denied"))
    rec.add(call_done(rec, turn_id, session_id, "tc4", "fetch_url", "execution_error",
                      "RuntimeError: connection reset"))
    steps.executed("tc4", "fetch_url", "execution_error", "RuntimeError: connection reset")
    steps.model_reasoning("Here is your status.", "", final=True)
    rec.add(completed(rec, turn_id, session_id, tools=4))
    await rec.flush()
    return Recorded(turn_id, session_id, [denial.decision_id])


async def held_for_approval_then_approved(ledger: Any, session_id: str = "s1") -> Recorded:
    """One turn that pauses on an approval and, resumed, runs the call."""
    rec = Recorder(ledger, [])
    turn_id = new_ulid()
    steps = TurnSteps(rec, turn_id, session_id)
    rec.add(started(rec, turn_id, session_id, "send the report"))
    steps.model_reasoning("[計画] 1. send_mail", "")
    ask = decided(turn_id, session_id, "tc9", "send_mail", "ask", "needs_approval")
    request_id = new_ulid()
    rec.add(ask)
    rec.add(ApprovalRequested(turn_id=turn_id, session_id=session_id, claim=request_id,
                              request_id=request_id, mode="approval",
                              decision_id=ask.decision_id, tool_call_id="tc9",
                              tool_name="send_mail", args_sha256=ask.args_sha256,
                              actor="cli:user", source="cli", reason_code="needs_approval",
                              expires_at="2099-01-01T00:00:00.000000Z"))
    steps.held("send_mail", ask.reason_code, ask.message, ask.decision_id, request_id,
               tool_call_id="tc9", effect="ask")
    rec.add(TurnPaused(turn_id=turn_id, session_id=session_id, request_id=request_id,
                       tool_call_id="tc9", tool_name="send_mail",
                       checkpoint_digest=rec.content("{}")))
    await rec.flush()
    # another process takes the turn up again
    rec = Recorder(ledger, [])
    steps = TurnSteps(rec, turn_id, session_id, await next_step_number(ledger, turn_id))
    rec.add(ApprovalDecided(turn_id=turn_id, session_id=session_id, claim=request_id,
                            request_id=request_id, decision="approved", decided_by="cli:boss",
                            reason_digest=None, tool_call_id="tc9", tool_name="send_mail"))
    rec.add(TurnResumed(turn_id=turn_id, session_id=session_id, claim=request_id,
                        request_id=request_id, decision="approved", resumed_by="cli:boss",
                        pid=1, host="h"))
    rec.add(call_done(rec, turn_id, session_id, "tc9", "send_mail", "ok", "sent"))
    steps.executed("tc9", "send_mail", "ok", "sent")
    rec.add(completed(rec, turn_id, session_id, tools=1))
    await rec.flush()
    return Recorded(turn_id, session_id, [ask.decision_id], [request_id])
