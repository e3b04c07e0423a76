"""A turn as the Live page shows it, folded from its audit entries.

Only the audit tier is read here (kinds, ids, statuses, durations, tokens,
digests); the bodies a viewer may read (the message, the answer) are fetched
separately, by digest, for viewers allowed to read content.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from overt.errors import EventDecodeError
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
    TurnResumed,
    TurnStarted,
)
from overt.ledger.base import Entry
from overt.web.timeline import TOOL_TONES, Tone, verdict


@dataclass(slots=True)
class CallView:
    """One tool call: its status while running, then how it ended."""

    tool_call_id: str
    tool_name: str
    status: str = "running"
    duration_ms: float | None = None
    effect: str | None = None
    rule: str | None = None


@dataclass(slots=True)
class StepView:
    step_number: int
    phase: str
    at: str
    content_digest: str
    seq: int


@dataclass(slots=True)
class TurnView:
    """One turn: who, where, which model and route, its steps and calls, its cost."""

    turn_id: str
    session_id: str | None
    started_at: str
    source: str = ""
    actor: str = ""
    model: str = ""
    route: str = ""
    status: str = "running"
    """``running``, ``awaiting_approval`` or how it ended (``completed`` …)."""
    waiting_on: str | None = None
    message_digest: str | None = None
    reply_digest: str | None = None
    error_type: str | None = None
    error_kind: str | None = None
    error_digest: str | None = None
    """The error's message, in the content tier (shown to a viewer reading content)."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: float | None = None
    inferences: int = 0
    steps: list[StepView] = field(default_factory=list)
    calls: dict[str, CallView] = field(default_factory=dict)
    last_seq: int = 0

    @property
    def ended(self) -> bool:
        return self.status not in ("running", "awaiting_approval")

    @property
    def tone(self) -> Tone:
        """The verdict's tone alone: ``ok``, ``bad``, ``held`` or ``running``."""
        return self.verdict[0]

    @property
    def verdict(self) -> tuple[Tone, str]:
        """The badge's tone and words: the worst thing in the turn so far, as the
        turn's page says it (:func:`overt.web.timeline.verdict`)."""
        return verdict(self.status, (
            ("held" if c.effect == "deny" else TOOL_TONES.get(c.status, "bad"),
             c.status.replace("_", " ")) for c in self.calls.values()))


def fold(entries: Iterable[Entry]) -> TurnView | None:
    """The turn its entries (in ``seq`` order) record; ``None`` without a ``turn.started``.

    Each entry is read as the typed event it recorded; one of a kind or shape this
    version does not know is passed over, as the trail passes it over."""
    view: TurnView | None = None
    for e in entries:
        try:
            event: Event | None = e.event()
        except EventDecodeError:
            continue
        if isinstance(event, TurnStarted):
            view = TurnView(e.turn_id or "", e.session_id, e.at, source=event.source,
                            actor=event.actor, model=event.model, route=event.route,
                            message_digest=event.message_digest)
        if view is None:
            continue
        view.last_seq = e.seq
        _apply(view, e, event)
    return view


def _apply(view: TurnView, e: Entry, event: Event | None) -> None:
    """``view`` with what ``event`` (entry ``e``'s, after its turn's ``turn.started``)
    records."""
    match event:
        case InferenceRecorded() as d:
            view.inferences += 1
            view.model, view.route = d.model or view.model, d.route or view.route
            if view.status == "running":  # running totals until the turn's own
                view.input_tokens += d.input_tokens
                view.output_tokens += d.output_tokens
                view.cost_usd += d.cost_usd
        case ReasoningStepRecorded() as d:
            view.steps.append(StepView(d.step_number, d.phase, e.at, d.content_digest, e.seq))
        case PolicyDecided() as d:
            call = _call(view, d.tool_call_id, d.tool_name)
            if call.effect in (None, "allow"):  # the rule that held a call stays shown
                call.effect, call.rule = d.effect, d.rule
        case ToolCallStarted() as d:
            _call(view, d.tool_call_id, d.tool_name).status = "running"
        case ToolCallCompleted() as d:
            call = _call(view, d.tool_call_id, d.tool_name)
            call.status, call.duration_ms = d.tool_status, d.tool_duration_ms
        case ApprovalRequested() as d:
            _call(view, d.tool_call_id, d.tool_name).status = "held"
        case ApprovalDecided() as d:
            call = _call(view, d.tool_call_id, d.tool_name)
            if call.status == "held":
                call.status = d.decision
        case TurnPaused() as d:
            view.status, view.waiting_on = "awaiting_approval", d.request_id
        case TurnResumed():
            view.status, view.waiting_on = "running", None
        case TurnCompleted() as d:
            view.status, view.reply_digest, view.error_type = d.status, d.reply_digest, d.error_type
            view.error_kind, view.error_digest = d.error_kind, d.error_digest
            view.input_tokens, view.output_tokens = d.input_tokens, d.output_tokens
            view.cost_usd, view.duration_ms = d.cost_usd, d.duration_ms
        case _:
            pass


def _call(view: TurnView, tool_call_id: str, tool_name: str) -> CallView:
    call = view.calls.get(tool_call_id)
    if call is None:
        call = view.calls[tool_call_id] = CallView(tool_call_id, tool_name)
    return call
