"""A tool call's fate before any effect: refused, held for a human, or allowed.

The limits (:func:`overt.engine.dispatch.precheck`) first, then the gate
(:class:`overt.policy.gate.Gate`); each decision is added to the turn's record.
A call run alone (:mod:`overt.engine.loop`) and calls run together
(:mod:`overt.engine.together`) are decided here alike.

Both are given the turn as a :class:`CallingTurn`: what deciding, running and
completing a call reads of it. :class:`overt.engine.loop.Turn` is one; the loop
imports this module, never the other way.
"""

from __future__ import annotations

from typing import Protocol

from overt.engine.dispatch import ToolOutcome, precheck, refuse
from overt.engine.record import CallSite, Recorder, canonical_or_repr
from overt.engine.values import Allowed, EngineSettings, Held
from overt.events import ApprovalMode
from overt.hooks.calls import HookSet
from overt.policy.actors import Actor
from overt.policy.gate import Gate, Verdict
from overt.reasoning.steps import TurnSteps
from overt.tools.base import Tool
from overt.tools.registry import ToolRegistry
from overt.types import ToolCall


class CallingEngine(Protocol):
    """What deciding and running a call reads of the engine
    (:class:`overt.engine.loop.Engine`)."""

    @property
    def tools(self) -> ToolRegistry: ...
    @property
    def settings(self) -> EngineSettings: ...
    @property
    def gate(self) -> Gate: ...
    @property
    def hooks(self) -> HookSet: ...


class CallingTurn(Protocol):
    """What deciding, running and completing a call reads of its turn
    (:class:`overt.engine.loop.Turn`)."""

    @property
    def engine(self) -> CallingEngine: ...

    recorder: Recorder
    steps: TurnSteps
    site: CallSite
    actor: Actor
    source: str
    route: str
    turn_id: str
    session_id: str
    offered: frozenset[str]
    tool_calls: int
    """Calls answered in the turn."""
    response_calls: int
    """Calls answered of the model's latest response."""
    can_provide: bool
    """Whether a plugin may provide a call's result (a tool need not be registered)."""

    def complete(self, call: ToolCall, outcome: ToolOutcome, args_digest: str,
                 provided_by: str | None, model_reads: str | None, *,
                 step: bool = True) -> ToolOutcome:
        """Record how the call ended; the outcome the model reads."""
        ...

    async def dispatch(self, tool: Tool, call: ToolCall) -> ToolOutcome:
        """Run an allowed call's tool (its intent already committed)."""
        ...


def decide(turn: CallingTurn, call: ToolCall, offered: frozenset[str], *,
           approved: str | None = None, allowed_before: int = 0) -> ToolOutcome | Held | Allowed:
    """``call``'s fate, recorded: refused (its outcome, completed), held for a human
    (:class:`Held`), or :class:`Allowed` to run.

    ``approved`` is the approval request a resumed call was approved under.
    ``allowed_before``: calls of this response allowed and not yet completed (run
    together), counted against the limits.
    """
    engine, rec = turn.engine, turn.recorder
    args_digest = rec.content(canonical_or_repr(call.arguments))
    checked = precheck(call, engine.tools, offered, turn.response_calls + allowed_before,
                       engine.settings.max_tool_calls, can_provide=turn.can_provide,
                       turn_calls=turn.tool_calls + allowed_before,
                       turn_cap=engine.settings.max_tool_calls_per_turn)
    if isinstance(checked, ToolOutcome):
        return turn.complete(call, checked, args_digest, None, None)
    verdict = engine.gate.check(
        tool_name=call.name, tool=checked, arguments=call.arguments,
        args_digest=args_digest, tool_call_id=call.id, actor=turn.actor,
        source=turn.source, route=turn.route, turn_id=turn.turn_id,
        session_id=turn.session_id, path="loop" if approved is None else "resume",
        approved_request=approved, read_only=checked is None and _described_read_only(
            engine.tools, call.name))
    rec.add(verdict.event)
    rec.part(engine.gate.policy.text)  # the rules that decided, once per engine
    if verdict.effect == "ask":
        return _hold(turn, call, verdict, "approval")
    if verdict.effect == "quarantine":
        held = _hold(turn, call, verdict, "quarantine")
        outcome = refuse("quarantined", f"{verdict.message}; the call is held for an "
                         f"operator's review as request {held.request_id} and was not run")
        return turn.complete(call, outcome, args_digest, None, None, step=False)
    if verdict.effect != "allow":
        turn.steps.held(call.name, verdict.reason_code, verdict.message,
                        verdict.decision_id, tool_call_id=verdict.event.tool_call_id,
                        effect=verdict.effect)
        return turn.complete(call, refuse(verdict.reason_code, verdict.message),
                             args_digest, None, None, step=False)
    return Allowed(checked, args_digest)


def _hold(turn: CallingTurn, call: ToolCall, verdict: Verdict, mode: ApprovalMode) -> Held:
    """An approval request bound to this exact call (tool, arguments digest, turn, actor)."""
    request = verdict.hold(mode, ttl_s=turn.engine.gate.approval_ttl_s)
    turn.recorder.add(request)
    turn.steps.held(call.name, verdict.reason_code, verdict.message, verdict.decision_id,
                    request.request_id, request.tool_call_id, effect=verdict.effect)
    return Held(call, request.request_id, verdict.message, request.expires_at)


def _described_read_only(tools: ToolRegistry, name: str) -> bool:
    """Whether the plugin that describes tool ``name`` (with no function here) said it
    changes nothing."""
    spec = tools.spec(name)
    return spec is not None and spec.read_only
