"""A turn as a timeline: each model call and tool call a span on the turn's own
time axis, the reasoning steps between them, and the worst thing that happened.

Built from the turn's audit entries alone (kinds, ids, statuses, durations,
tokens, digests), read as typed events. The times come from the record: a
model call ends at its ``inference`` entry and lasted ``duration_ms``; a tool
call starts at its ``tool_call.started`` (or, lacking one, ends at its
``tool_call.completed`` after ``tool_duration_ms``). The bodies (the request as
sent, the answer, a call's arguments and result) are named by digest here and
read by the page only for a viewer allowed to read content.

A span's ``tone`` is how the page colours it: ``bad`` (red) for a failure,
``held`` (amber) for a call waiting on, or stopped by, a person or a rule,
``ok`` otherwise. The turn's :attr:`Timeline.verdict` is its worst span's or
its own ending's, never a green "completed" over a failed call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from overt.clock import parse_iso
from overt.errors import EventDecodeError, UsageError
from overt.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    InferenceRecorded,
    PolicyDecided,
    ReasoningStepRecorded,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnPaused,
    TurnStarted,
)
from overt.ledger.base import Entry
from overt.reasoning.trail import TurnTrail

Tone = Literal["ok", "held", "bad", "running"]
RANK: dict[Tone, int] = {"ok": 0, "running": 1, "held": 2, "bad": 3}

TOOL_TONES: dict[str, Tone] = {"ok": "ok", "not_allowed": "held", "execution_error": "bad",
                               "timeout": "bad", "unknown_tool": "bad", "running": "running",
                               "held": "held", "denied": "held", "expired": "held",
                               "approved": "running"}
"""How a tool call's status colours its span (``refused``: the tool answered ok but
its result says it found nothing or refused; set by the page from the result)."""


@dataclass(slots=True)
class Span:
    """One model call or tool call on the turn's axis (milliseconds from its start)."""

    kind: Literal["model", "tool"]
    anchor: str
    title: str
    seq: int
    start_ms: float
    duration_ms: float | None
    status: str
    tone: Tone
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""
    route: str = ""
    escalated: bool = False
    escalation_reason: str | None = None
    error_type: str | None = None
    request_digest: str | None = None
    response_digest: str | None = None
    tool_call_id: str | None = None
    args_digest: str | None = None
    result_digest: str | None = None
    known_name: bool = True
    """False for a tool name the model invented: the record holds its digest."""
    effect: str | None = None
    rule: str | None = None
    reason_code: str | None = None
    why: str = ""
    """The policy's message for a call it held or denied (shown once, on that call)."""
    approval: str | None = None
    """How the approval request a held call waited on was decided (or ``pending``)."""
    approval_id: str | None = None

    @property
    def end_ms(self) -> float:
        return self.start_ms + (self.duration_ms or 0.0)


@dataclass(slots=True)
class StepMark:
    """A reasoning step, between the spans (its text is a body, by digest)."""

    seq: int
    number: int
    phase: str
    at_ms: float
    digest: str
    anchor: str


@dataclass(slots=True)
class Timeline:
    """A turn laid out in time: its spans and steps in ``seq`` order."""

    turn_id: str
    session_id: str | None
    started_at: str
    source: str = ""
    actor: str = ""
    model: str = ""
    status: str = "running"
    error_type: str | None = None
    error_kind: str | None = None
    message_digest: str | None = None
    reply_digest: str | None = None
    duration_ms: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    waiting_on: str | None = None
    first_seq: int = 0
    last_seq: int = 0
    rows: list[Span | StepMark] = field(default_factory=list)

    @property
    def spans(self) -> list[Span]:
        return [r for r in self.rows if isinstance(r, Span)]

    @property
    def total_ms(self) -> float:
        """The axis's length: the turn's duration, or its furthest span's end."""
        ends = [s.end_ms for s in self.spans]
        return max([self.duration_ms or 0.0, *ends, 1.0])

    def verdict(self, refused: Iterable[str] = ()) -> tuple[Tone, str]:
        """The turn's badge: its tone and what it says. ``refused``: anchors of calls
        whose result (a body) says they failed though the tool answered."""
        refused = set(refused)
        return verdict(self.status, (
            ("bad", f"{s.title} found nothing") if s.anchor in refused
            else (s.tone, s.status.replace("_", " ")) for s in self.spans))


def lay_out(entries: Iterable[Entry]) -> Timeline | None:
    """The timeline the turn's ``entries`` (in ``seq`` order) record; ``None``
    without a ``turn.started``. An entry of a kind or shape this version does not
    know is passed over, as the trail passes it over.

    Raises:
        UsageError: an entry's time is not one the ledger writes.
    """
    line: Timeline | None = None
    zero: datetime | None = None
    calls: dict[str, Span] = {}
    for e in entries:
        try:
            event: Event | None = e.event()
        except EventDecodeError:
            continue
        if isinstance(event, TurnStarted):
            line = Timeline(e.turn_id or "", e.session_id, e.at, source=event.source,
                            actor=event.actor, model=event.model,
                            message_digest=event.message_digest, first_seq=e.seq)
            zero = _time(e.at)
            continue
        if line is None or zero is None:
            continue
        line.last_seq = e.seq
        at = (_time(e.at) - zero).total_seconds() * 1000
        _apply(line, calls, e, event, at)
    return line


def _time(at: str) -> datetime:
    try:
        return parse_iso(at)
    except UsageError as exc:
        raise UsageError(f"entry time {at!r} is not the ledger's format") from exc


def _apply(line: Timeline, calls: dict[str, Span], e: Entry, event: Event | None,
           at: float) -> None:
    match event:
        case InferenceRecorded() as d:
            tone: Tone = "bad" if d.error_type else "ok"
            line.rows.append(Span(
                "model", f"model-{e.seq}", d.model, e.seq, max(at - d.duration_ms, 0.0),
                d.duration_ms, d.error_type or d.stop_reason or "ok", tone, d.input_tokens,
                d.output_tokens, d.cost_usd, d.model, d.route, d.escalated,
                d.escalation_reason, d.error_type, d.request_digest, d.response_digest))
            line.model = d.model or line.model
            if line.duration_ms is None:  # running totals until the turn's own
                line.input_tokens += d.input_tokens
                line.output_tokens += d.output_tokens
                line.cost_usd += d.cost_usd
        case ReasoningStepRecorded() as d:
            if d.tool_call_id is not None and d.tool_call_id in calls:
                pass  # the engine's own line about a call (its result quoted, or why it
                # was held): the call's row says it, with the result itself
            elif d.policy_decision_id is None:
                line.rows.append(StepMark(e.seq, d.step_number, d.phase, at,
                                          d.content_digest, f"step-{e.seq}"))
        case PolicyDecided() as d:
            span = _call(line, calls, d.tool_call_id, d.tool_name, e.seq, at)
            if span.effect in (None, "allow"):  # the rule that held a call stays shown
                span.effect, span.rule, span.reason_code = d.effect, d.rule, d.reason_code
                span.why = d.message if d.effect != "allow" else ""
            if d.effect == "deny":
                span.status, span.tone = "denied", "held"
        case ToolCallStarted() as d:
            span = _call(line, calls, d.tool_call_id, d.tool_name, e.seq, at)
            span.start_ms = at
        case ToolCallCompleted() as d:
            span = _call(line, calls, d.tool_call_id, d.tool_name, e.seq, at)
            if span.start_ms >= at - 1e-6 or span.status in ("held", "approved"):
                span.start_ms = max(at - d.tool_duration_ms, 0.0)
            span.duration_ms, span.status = d.tool_duration_ms, d.tool_status
            span.tone = TOOL_TONES.get(d.tool_status, "bad")
            if span.approval and span.approval.startswith("denied"):
                span.tone = "held"
            span.args_digest, span.result_digest = d.args_sha256, d.result_digest
            span.error_type, span.reason_code = d.exc_type, d.reason_code or span.reason_code
            span.known_name = d.tool_status != "unknown_tool"
        case ApprovalRequested() as d:
            span = _call(line, calls, d.tool_call_id, d.tool_name, e.seq, at)
            span.status, span.tone, span.approval = "held", "held", "pending"
            span.approval_id = d.request_id
        case ApprovalDecided() as d:
            span = _call(line, calls, d.tool_call_id, d.tool_name, e.seq, at)
            span.approval = f"{d.decision} by {d.decided_by}"
            span.approval_id = d.request_id
            if span.status == "held":
                span.status = d.decision
                span.tone = TOOL_TONES.get(d.decision, "held")
        case TurnPaused() as d:
            line.status, line.waiting_on = "awaiting_approval", d.request_id
        case TurnCompleted() as d:
            line.status, line.reply_digest = d.status, d.reply_digest
            line.error_type, line.error_kind = d.error_type, d.error_kind
            line.input_tokens, line.output_tokens = d.input_tokens, d.output_tokens
            line.cost_usd, line.duration_ms = d.cost_usd, d.duration_ms
        case _:
            if line.status == "awaiting_approval" and e.kind == "turn.resumed":
                line.status, line.waiting_on = "running", None


def call_anchor(tool_call_id: str) -> str:
    """The anchor of a tool call's row on its turn's page (the model chose the id:
    its digest, cut, stands in for it in a URL)."""
    return "call-" + hashlib.sha256(tool_call_id.encode()).hexdigest()[:12]


def _call(line: Timeline, calls: dict[str, Span], tool_call_id: str, tool_name: str,
          seq: int, at: float) -> Span:
    span = calls.get(tool_call_id)
    if span is None:
        span = calls[tool_call_id] = Span("tool", call_anchor(tool_call_id), tool_name, seq,
                                          at, None, "running", "running",
                                          tool_call_id=tool_call_id)
        line.rows.append(span)
    return span


def verdict(status: str, calls: Iterable[tuple[Tone, str]]) -> tuple[Tone, str]:
    """A turn's badge, its tone and words, from its ``status`` and each call's (tone,
    words) in order: the turn's own ending when it failed, else the worst call's tone,
    naming each call that made it worse. The turn's page, a session's and Live all
    say it this way."""
    said = status.replace("_", " ")
    if status not in ("completed", "running", "awaiting_approval"):
        return "bad", said
    worst: Tone = {"completed": "ok", "running": "running"}.get(status, "held")  # type: ignore[assignment]
    for tone, words in calls:
        if RANK[tone] > RANK[worst]:
            worst, said = tone, f"{said} · {words}"
    return worst, said


def trail_verdict(turn: TurnTrail) -> tuple[Tone, str]:
    """A session page's badge for ``turn`` (from its trail): as :meth:`Timeline.verdict`
    says it, from the records the trail holds."""
    status = turn.status or ("awaiting_approval" if turn.paused_on else "running")
    calls = [(TOOL_TONES.get(c.status, "bad"), c.status.replace("_", " "))
             for c in turn.tool_calls]
    denials: list[tuple[Tone, str]] = [("held", "denied") for d in turn.decisions
                                        if d.effect == "deny"]
    return verdict(status, calls + denials)
