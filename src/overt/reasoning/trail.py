"""The audit trail: turns in order, each with its reasoning steps, tool calls,
policy decisions and approvals joined.

Built from one ledger read (:meth:`~overt.ledger.base.Ledger.trail_rows`: three
queries in one snapshot), whatever the number of turns: an auditor asks for a whole session, or for
everything in a time window across sessions, and reads why each call was made
next to what the call did and who let it through.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from overt.errors import UsageError
from overt.events import REASONING_PHASES
from overt.ledger.base import Ledger, TrailRows
from overt.ledger.trail_index import TRAIL_KINDS
from overt.ledger.trail_read import EVENT_COLUMNS, EVENT_POSITION, STEP_COLUMNS


class Step(NamedTuple):
    """One reasoning step. ``content`` is ``None`` when its text was pruned.

    The trail's records are named tuples, not frozen dataclasses: as immutable
    and as typed, and cheaper to build (a frozen dataclass sets each field
    through ``object.__setattr__``), which counts in a long session's trail.
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
    """Tuples, not lists: most turns have none, and the empty tuple is one shared
    object, not a list per turn."""
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
    rows = await ledger.trail_rows(turn_id=turn_id, session_id=session_id,
                                   since=since, until=until)
    session = session_id
    if turn_id is not None and not rows.turns and (rows.steps or rows.events):
        # the turn's start was pruned: its session is what its entries say
        first = await ledger.entries(turn_id=turn_id, kinds=TRAIL_KINDS, limit=1)
        session = first[0].session_id if first else None
    return Trail(assemble(rows, keep, session), session_id, turn_id, since, until)


_CALL = operator.itemgetter(*[EVENT_COLUMNS.index(c) for c in ("seq", "at")],
                            *[EVENT_POSITION["tool_call.completed"][c] for c in (
                                "tool_call_id", "tool_name", "tool_status", "tool_duration_ms",
                                "reason_code", "exc_type")])
"""A tool call's record from its event row, in :class:`ToolCallRecord`'s order."""
_STATUS = EVENT_POSITION["turn.completed"]["status"]
_PHASE = STEP_COLUMNS.index("phase")


def assemble(rows: TrailRows, keep: frozenset[str] | None = None,
             session_id: str | None = None) -> list[TurnTrail]:
    """Turns from the rows of a trail (:class:`~overt.ledger.base.TrailRows`), in the
    order they started (of their first entry), each record in ``seq`` order.

    ``session_id``: the session of a turn whose ``turn.started`` is not among the
    rows (pruned); every other turn's is its start's.

    The hot loops of a trail: a step's row is its turn and then its
    :class:`Step`'s fields, in order, so the record is the row's tail
    (``tuple.__new__``: a named tuple's own ``__new__`` is Python code), and the
    turn is looked up only when it changes.
    """
    turns: dict[str, TurnTrail] = {}
    first: dict[str, int] = {}
    for seq, turn_id, session, at, source, model, message in rows.turns:
        started = turns.get(turn_id)
        if started is None:
            turns[turn_id] = TurnTrail(turn_id, session or None, at, source, model, message)
            first[turn_id] = seq
        else:  # started twice (a ledger written by hand): the later start stands
            started.started_at, started.source, started.model, started.message = (
                at, source, model, message)
    early = _Early(turns, first, session_id)
    new = tuple.__new__
    current: str | None = None
    turn = TurnTrail("", None, "")
    steps: list[Step] = []
    for r in rows.steps:
        if r[0] != current:
            current = r[0]
            found = turns.get(r[0])
            turn = found if found is not None and r[1] > first[r[0]] else early.turn(*r[:3])
            steps = turn.steps
        if keep is None or r[_PHASE] in keep:
            steps.append(new(Step, r[1:]))
    current = None
    call, status = _CALL, _STATUS
    for r in rows.events:
        turn_id, kind = r[0], r[1]
        if turn_id != current:
            current = turn_id
            found = turns.get(turn_id)
            turn = found if found is not None and r[2] > first[turn_id] else early.turn(
                turn_id, r[2], r[3])
        if kind == "tool_call.completed":
            turn.tool_calls.append(new(ToolCallRecord, call(r)))
        elif kind == "turn.completed":
            turn.status, turn.completed_at, turn.paused_on = r[status], r[3], None
        else:
            _approval_record(turn, kind, r)
    if not early.moved:
        return list(turns.values())
    return sorted(turns.values(), key=lambda t: first[t.turn_id])


class _Early:
    """The turns rows come for before their start: a turn whose ``turn.started``
    is not among the rows (pruned, or out of scope), or an entry before it."""

    def __init__(self, turns: dict[str, TurnTrail], first: dict[str, int],
                 session_id: str | None) -> None:
        self.turns, self.first, self.session_id = turns, first, session_id
        self.unstarted: set[str] = set()
        self.moved = False

    def turn(self, turn_id: str, seq: int, at: str) -> TurnTrail:
        """The turn ``turn_id``, whose entry ``seq`` (at ``at``) is the first seen."""
        turn = self.turns.get(turn_id)
        if turn is None:
            turn = self.turns[turn_id] = TurnTrail(turn_id, self.session_id, at)
            self.unstarted.add(turn_id)
        elif turn_id in self.unstarted:
            turn.started_at = at  # a turn with no start began at its first entry
        self.first[turn_id] = seq
        self.moved = True
        return turn


def _approval_record(turn: TurnTrail, kind: str, r: Sequence[Any]) -> None:
    """The records of the approval path (columns named in
    :data:`~overt.ledger.trail_read.EVENT_POSITION`)."""
    seq, at = r[2], r[3]
    p = EVENT_POSITION[kind]
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
