"""The audit trail: turns in order, each with its reasoning steps, tool calls,
policy decisions and approvals joined.

Built from one ledger query (:meth:`~overt.ledger.base.Ledger.trail_rows`),
whatever the number of turns: an auditor asks for a whole session, or for
everything in a time window across sessions, and reads why each call was made
next to what the call did and who let it through.
"""

from __future__ import annotations

import gc
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from overt.errors import UsageError
from overt.events import REASONING_PHASES
from overt.ledger.base import Ledger, TrailRow
from overt.ledger.trail_index import FIELD_POSITION, POSITION


class Step(NamedTuple):
    """One reasoning step. ``content`` is ``None`` when its text was pruned.

    The trail's records are named tuples, not frozen dataclasses: as immutable
    and as typed, and built five times faster (a frozen dataclass sets each
    field through ``object.__setattr__``), which counts at 50,000 steps.
    """

    seq: int
    at: str
    step_id: str
    step_number: int
    phase: str
    content: str | None
    content_digest: str
    tool_call_id: str | None = None
    policy_decision_id: str | None = None
    approval_request_id: str | None = None


class ToolCallRecord(NamedTuple):
    """How a tool call ended."""

    seq: int
    at: str
    tool_call_id: str
    tool_name: str
    status: str
    duration_ms: float
    reason_code: str | None
    exc_type: str | None


class DecisionRecord(NamedTuple):
    """What the policy gate decided about a call, and by which rule."""

    seq: int
    at: str
    decision_id: str
    tool_call_id: str
    tool_name: str
    effect: str
    reason_code: str
    message: str
    rule: str


class ApprovalRecord(NamedTuple):
    """An approval request and, once decided, its decision (``None`` while open)."""

    seq: int
    at: str
    request_id: str
    tool_call_id: str
    tool_name: str
    mode: str
    reason_code: str
    decision: str | None = None
    decided_by: str | None = None
    decided_at: str | None = None


@dataclass(slots=True, repr=False)
class TurnTrail:
    """One turn: what was asked, how it ended, and everything recorded between.

    Its repr is a summary: asyncio (3.11) formats the repr of a coroutine's
    result when ``asyncio.run`` ends, and the full repr of a 10,000-turn trail
    takes longer than building it.
    """

    turn_id: str
    session_id: str | None
    started_at: str
    source: str | None = None
    model: str | None = None
    message: str | None = None
    status: str | None = None
    """How it ended (``completed``, ``model_error`` …); ``None`` while running."""
    completed_at: str | None = None
    paused_on: str | None = None
    """The approval request the turn waits on, if it is paused now."""
    steps: list[Step] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    decisions: tuple[DecisionRecord, ...] = ()
    """Tuples, not lists: most turns have none, and 20,000 empty lists in a
    10,000-turn trail cost the garbage collector's pass over it 10 ms."""
    approvals: tuple[ApprovalRecord, ...] = ()

    def __repr__(self) -> str:
        return (f"TurnTrail({self.turn_id!r}, status={self.status!r}, "
                f"steps={len(self.steps)}, tool_calls={len(self.tool_calls)}, "
                f"decisions={len(self.decisions)}, approvals={len(self.approvals)})")

    def records(self) -> list[Step | ToolCallRecord | DecisionRecord | ApprovalRecord]:
        """Every record of the turn in ledger order (an approval at its request)."""
        merged: list[Step | ToolCallRecord | DecisionRecord | ApprovalRecord] = [
            *self.steps, *self.tool_calls, *self.decisions, *self.approvals]
        merged.sort(key=lambda r: r.seq)
        return merged


@dataclass(slots=True, repr=False)
class Trail:
    """Turns in the order they started; what was asked for. (Its repr is a
    summary, for the reason given on :class:`TurnTrail`.)"""

    turns: list[TurnTrail]
    session_id: str | None = None
    turn_id: str | None = None
    since: str | None = None
    until: str | None = None

    def __repr__(self) -> str:
        asked = ", ".join(f"{k}={v!r}" for k, v in (
            ("session_id", self.session_id), ("turn_id", self.turn_id),
            ("since", self.since), ("until", self.until)) if v is not None)
        return f"Trail({asked}, turns={len(self.turns)})"

    def steps(self) -> Iterator[tuple[TurnTrail, Step]]:
        """Every step of every turn, in order."""
        for turn in self.turns:
            for step in turn.steps:
                yield turn, step


def check_phases(phases: Collection[str] | None) -> frozenset[str] | None:
    """``phases`` as a set, checked.

    Raises:
        UsageError: a phase that is not one of the five.
    """
    if not phases:
        return None
    unknown = sorted(set(phases) - set(REASONING_PHASES))
    if unknown:
        raise UsageError(f"unknown phase {', '.join(unknown)}: one of "
                         f"{', '.join(REASONING_PHASES)}")
    return frozenset(phases)


async def build_trail(ledger: Ledger, *, session_id: str | None = None,
                      turn_id: str | None = None, since: str | None = None,
                      until: str | None = None,
                      phases: Collection[str] | None = None) -> Trail:
    """The trail of one turn (``turn_id``), of a session (``session_id``), of the
    turns started in ``[since, until)``, or of a session's turns in that window.
    ``phases`` keeps only steps of those phases (every other record stays).

    Raises:
        UsageError: nothing to select by, or an unknown phase.
        LedgerError: the ledger cannot be read.
    """
    if turn_id is None and session_id is None and since is None and until is None:
        raise UsageError("a trail needs a turn, a session or a time range")
    keep = check_phases(phases)
    # Reading and assembling a trail allocates some 500,000 objects (tuples, step
    # records, decoded records), none of them garbage: the cyclic collector would
    # walk the growing heap again and again for nothing (40 % of the assembly of
    # 50,000 steps). Reference counting still frees what is dropped.
    collecting = gc.isenabled()
    gc.disable()
    try:
        rows = await ledger.trail_rows(turn_id=turn_id, session_id=session_id,
                                       since=since, until=until)
        turns = assemble(rows, keep)
    finally:
        if collecting:
            gc.enable()
    return Trail(turns, session_id, turn_id, since, until)


_PHASES = {phase: phase for phase in REASONING_PHASES}
_F = FIELD_POSITION
_STEP = tuple(_F["reasoning.step"][c] for c in (
    "step_id", "step_number", "phase", "tool_call_id", "policy_decision_id",
    "approval_request_id"))
_CALL = tuple(_F["tool_call.completed"][c] for c in (
    "tool_call_id", "tool_name", "tool_status", "tool_duration_ms", "reason_code", "exc_type"))
_PHASE = _F["reasoning.step"]["phase"]
_SOURCE, _MODEL = _F["turn.started"]["source"], _F["turn.started"]["model"]
_STATUS = _F["turn.completed"]["status"]
_DIGEST = POSITION["body_digest"]


def assemble(rows: list[TrailRow], keep: frozenset[str] | None = None) -> list[TurnTrail]:
    """Turns from trail rows (see :data:`~overt.ledger.base.TrailRow`), in ``seq`` order.

    The hot loop of a trail: a row's columns go straight into its named tuple
    (``tuple.__new__``: a named tuple's own ``__new__`` is Python code), the turn
    looked up only when it changes, and the strings many records repeat (a
    commit's time, a phase) shared, not held once per record: fewer objects for
    the garbage collector to walk once the trail is built.
    """
    turns: dict[str, TurnTrail] = {}
    new, phases = tuple.__new__, _PHASES
    step_at, call_at = _STEP, _CALL
    current: str | None = None
    last_at = ""
    turn = TurnTrail("", None, "")
    for r in rows:
        seq, kind, turn_id, at = r[0], r[1], r[2], r[4]
        if at == last_at:
            at = last_at
        else:
            last_at = at
        if turn_id != current:
            current = turn_id
            found = turns.get(turn_id)
            if found is None:
                found = turns[turn_id] = TurnTrail(turn_id, r[3] or None, at)
            turn = found
        if kind == "reasoning.step":
            phase = r[_PHASE]
            if keep is None or phase in keep:
                i, n, _, c, p, a = step_at
                turn.steps.append(new(Step, (seq, at, r[i], r[n], phases.get(phase, phase),
                                             r[-1], r[_DIGEST], r[c], r[p], r[a])))
        elif kind == "tool_call.completed":
            turn.tool_calls.append(new(ToolCallRecord, (seq, at, *[r[i] for i in call_at])))
        elif kind == "turn.started":
            turn.started_at, turn.source, turn.model, turn.message = (
                at, r[_SOURCE], r[_MODEL], r[-1])
        elif kind == "turn.completed":
            turn.status, turn.completed_at, turn.paused_on = r[_STATUS], at, None
        else:
            _approval_record(turn, seq, at, kind, r)
    return list(turns.values())


def _approval_record(turn: TurnTrail, seq: int, at: str, kind: str,
                     r: Sequence[Any]) -> None:
    """The records of the approval path (columns named in
    :data:`~overt.ledger.trail_index.FIELD_POSITION`)."""
    p = _F.get(kind, {})
    if kind == "policy.decision":
        turn.decisions = (*turn.decisions, DecisionRecord(
            seq, at, r[p["decision_id"]], r[p["tool_call_id"]], r[p["tool_name"]],
            r[p["effect"]], r[p["reason_code"]], r[p["message"]] or "", r[p["rule"]] or ""))
    elif kind == "approval.requested":
        turn.approvals = (*turn.approvals, ApprovalRecord(
            seq, at, r[p["request_id"]], r[p["tool_call_id"]], r[p["tool_name"]],
            r[p["mode"]], r[p["reason_code"]]))
    elif kind == "approval.decided":
        request = r[p["request_id"]]
        turn.approvals = tuple(
            a._replace(decision=r[p["decision"]], decided_by=r[p["decided_by"]], decided_at=at)
            if a.request_id == request else a for a in turn.approvals)
    elif kind == "turn.paused":
        turn.paused_on = r[p["request_id"]]
    elif kind == "turn.resumed":
        turn.paused_on = None
