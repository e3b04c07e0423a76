"""The reasoning steps of one turn, added to the turn's pending records.

The engine loop holds one :class:`TurnSteps` per turn and tells it what
happened: the model reasoned, a tool call finished, something failed, the
gate held a call. Each call adds ``reasoning.step`` events to the turn's
recorder (the step's text to the content tier beside it), so a step is
committed in the same transaction as the records it describes, or not at all.

Which call for what (seed 004's integration points):

- after each model response: :meth:`TurnSteps.model_reasoning` (thinking
  blocks, ``<think>`` blocks, free text before a tool call);
- after each tool call that ran or was refused before running (unknown tool,
  limit, a hook's block): :meth:`TurnSteps.executed`, an ``execute`` step, or
  an ``error`` step when it did not end ``ok``;
- when the policy gate denies, asks for approval or quarantines a call:
  :meth:`TurnSteps.held`, a ``waiting_approval`` step linked to the decision
  and the approval request, *instead of* ``executed`` for that call (so
  ``--phase error`` lists failures, not refusals);
- a model failure or any other handled failure: :meth:`TurnSteps.failed`.
"""

from __future__ import annotations

from typing import Protocol

from overt.events import Event, PolicyEffect, ReasoningPhase, ReasoningStepRecorded
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.models.toolcall_parse import split_reasoning
from overt.reasoning.parse import parse_steps

RESULT_CHARS = 500
"""How much of a tool's result an ``execute`` step quotes (the whole result is
in the content tier under the call's ``result_digest``)."""

_HELD_AS: dict[str, str] = {"deny": "denied", "ask": "held for approval",
                            "quarantine": "quarantined", "allow": "allowed"}


class StepSink(Protocol):
    """Where steps go: the engine's :class:`~overt.engine.record.Recorder` is one."""

    def add(self, event: Event, **contents: str) -> None: ...

    def content(self, body: str) -> str: ...


class TurnSteps:
    """The steps of one turn, numbered from ``next_number`` without gaps.

    ``next_number`` lets a resumed turn go on where it paused (see
    :func:`next_step_number`). Every method returns the step events it added.
    """

    def __init__(self, sink: StepSink, turn_id: str, session_id: str | None,
                 next_number: int = 0) -> None:
        self.sink = sink
        self.turn_id = turn_id
        self.session_id = session_id
        self.next_number = next_number

    def model_reasoning(self, text: str, reasoning: str = "", *,
                        final: bool = False) -> list[ReasoningStepRecorded]:
        """Steps from one model response: ``reasoning`` (the provider's thinking
        blocks) first, then ``<think>`` blocks inside ``text``, then the rest of
        ``text``, the free text said before a tool call. With ``final`` the rest
        of ``text`` is the answer, recorded as the turn's reply, not as a step.
        """
        if not reasoning and "think>" not in text and (final or not text):
            return []  # nothing to parse (the usual plain answer): the fast path
        inline = ""
        if "think>" in text:
            text, inline = split_reasoning(text)
        sources = (reasoning, inline) if final else (reasoning, inline, text)
        return [self._add(parsed.phase, parsed.content)
                for source in sources for parsed in parse_steps(source)]

    def executed(self, tool_call_id: str, tool_name: str, status: str,
                 result_text: str) -> ReasoningStepRecorded:
        """A tool call ended: ``tool -> status, result`` (quoted up to 500
        characters), an ``execute`` step if ``status`` is ``ok``, else ``error``."""
        content = f"{tool_name} -> {status}"
        quoted = _quote(result_text)
        if quoted:
            content += f", {quoted}"
        return self._add("execute" if status == "ok" else "error", content,
                         tool_call_id=tool_call_id)

    def failed(self, message: str, tool_call_id: str | None = None) -> ReasoningStepRecorded:
        """Something failed (the model, a tool, the turn itself): an ``error`` step."""
        return self._add("error", message.strip() or "(no message)", tool_call_id=tool_call_id)

    def held(self, tool_name: str, reason_code: str, message: str, decision_id: str,
             request_id: str | None = None, tool_call_id: str | None = None, *,
             effect: PolicyEffect | None = None) -> ReasoningStepRecorded:
        """The gate did not let a call run now: a ``waiting_approval`` step linked
        to the policy decision and, when one was opened, the approval request.

        ``effect`` says how (denied, held for approval, quarantined); without it,
        a call with a request is taken as held for approval, one without as denied.
        """
        how = _HELD_AS.get(effect or ("ask" if request_id else "deny"), str(effect))
        content = f"{tool_name} {how} by policy ({reason_code})"
        if message.strip():
            content += f": {message.strip()}"
        if request_id is not None and effect != "quarantine":
            content += "; awaiting human approval"
        return self._add("waiting_approval", content, tool_call_id=tool_call_id,
                         policy_decision_id=decision_id, approval_request_id=request_id)

    def _add(self, phase: ReasoningPhase, content: str, *, tool_call_id: str | None = None,
             policy_decision_id: str | None = None,
             approval_request_id: str | None = None) -> ReasoningStepRecorded:
        step = ReasoningStepRecorded(
            turn_id=self.turn_id, session_id=self.session_id, step_id=new_ulid(),
            step_number=self.next_number, phase=phase,
            content_digest=self.sink.content(content), tool_call_id=tool_call_id,
            policy_decision_id=policy_decision_id, approval_request_id=approval_request_id)
        self.next_number += 1
        self.sink.add(step)
        return step


def _quote(text: str) -> str:
    text = text.strip()
    if len(text) <= RESULT_CHARS:
        return text
    return text[:RESULT_CHARS - 1] + "…"


async def next_step_number(ledger: Ledger, turn_id: str) -> int:
    """The number the next step of ``turn_id`` takes: one past the last recorded
    (0 for a turn without steps). For a turn resumed in another process."""
    entries = await ledger.entries(turn_id=turn_id, kinds=[ReasoningStepRecorded.kind])
    return max((e.event(ReasoningStepRecorded).step_number for e in entries), default=-1) + 1
