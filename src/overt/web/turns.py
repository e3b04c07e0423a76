"""A turn as the Live page shows it, folded from its audit entries.

Only the audit tier is read here (kinds, ids, statuses, durations, tokens,
digests); the bodies a viewer may read (the message, the answer) are fetched
separately, by digest, for viewers allowed to read content.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from overt.ledger.base import Entry


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


def fold(entries: Iterable[Entry]) -> TurnView | None:
    """The turn its entries (in ``seq`` order) record; ``None`` without a ``turn.started``."""
    view: TurnView | None = None
    for e in entries:
        d = e.data
        if e.kind == "turn.started":
            view = TurnView(e.turn_id or "", e.session_id, e.at, source=str(d.get("source", "")),
                            actor=str(d.get("actor", "")), model=str(d.get("model", "")),
                            route=str(d.get("route", "")),
                            message_digest=d.get("message_digest"))
        if view is None:
            continue
        view.last_seq = e.seq
        if e.kind == "inference":
            view.inferences += 1
            view.model = str(d.get("model") or view.model)
            view.route = str(d.get("route") or view.route)
            if view.status == "running":  # running totals until the turn's own
                view.input_tokens += int(d.get("input_tokens", 0))
                view.output_tokens += int(d.get("output_tokens", 0))
                view.cost_usd += float(d.get("cost_usd", 0.0))
        elif e.kind == "reasoning.step":
            view.steps.append(StepView(int(d.get("step_number", 0)), str(d.get("phase", "")),
                                       e.at, str(d.get("content_digest", "")), e.seq))
        elif e.kind == "policy.decision":
            call = _call(view, d)
            if call.effect in (None, "allow"):  # the rule that held a call stays shown
                call.effect, call.rule = d.get("effect"), d.get("rule")
        elif e.kind == "tool_call.started":
            _call(view, d).status = "running"
        elif e.kind == "tool_call.completed":
            call = _call(view, d)
            call.status = str(d.get("tool_status", ""))
            call.duration_ms = d.get("tool_duration_ms")
        elif e.kind == "approval.requested":
            _call(view, d).status = "held"
        elif e.kind == "approval.decided":
            call = _call(view, d)
            if call.status == "held":
                call.status = str(d.get("decision", ""))
        elif e.kind == "turn.paused":
            view.status, view.waiting_on = "awaiting_approval", d.get("request_id")
        elif e.kind == "turn.resumed":
            view.status, view.waiting_on = "running", None
        elif e.kind == "turn.completed":
            view.status = str(d.get("status", "completed"))
            view.reply_digest = d.get("reply_digest")
            view.error_type = d.get("error_type")
            view.input_tokens = int(d.get("input_tokens", 0))
            view.output_tokens = int(d.get("output_tokens", 0))
            view.cost_usd = float(d.get("cost_usd", 0.0))
            view.duration_ms = d.get("duration_ms")
    return view


def _call(view: TurnView, d: dict[str, object]) -> CallView:
    key = str(d.get("tool_call_id", ""))
    call = view.calls.get(key)
    if call is None:
        call = view.calls[key] = CallView(key, str(d.get("tool_name", "")))
    return call
