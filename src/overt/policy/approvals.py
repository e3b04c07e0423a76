"""Approval requests as the ledger holds them, and deciding them, once.

A request is an ``approval.requested`` entry; its decision an
``approval.decided`` entry; taking the held work up again a ``turn.resumed``
entry. The last two are once-only claims keyed by the request id, so a second
decision or a second resumption is refused by the ledger itself, in any
process, on either backend. Nothing here runs a tool or a model: the runtime
resumes what a decision releases (:mod:`overt.engine.resume`).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from overt.clock import now_iso
from overt.errors import ApprovalError, LedgerConflict, NotFoundError
from overt.events import (
    ApprovalDecided,
    ApprovalDecision,
    ApprovalRequested,
    CapabilityChecked,
    Event,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnResumed,
)
from overt.ledger.base import Entry, Ledger
from overt.ledger.canonical import digest_text
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities

ApprovalStatus = Literal["pending", "approved", "denied", "expired"]
EXPIRY_ACTOR = Actor("system", "expiry")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One request and what became of it."""

    request_id: str
    mode: str
    status: ApprovalStatus
    turn_id: str | None
    session_id: str | None
    tool_name: str
    tool_call_id: str
    args_sha256: str
    actor: str
    source: str
    reason_code: str
    decision_id: str
    requested_at: str
    requested_seq: int
    expires_at: str
    decided_by: str | None = None
    decided_at: str | None = None
    reason_digest: str | None = None
    resumed: bool = False
    call_started_seq: int | None = None
    """The ``tool_call.started`` entry of the call this request released, if one."""
    call_completed: bool = False
    """Whether that call recorded its ``tool_call.completed``."""
    taken_up_seq: int | None = None
    """The ``turn.resumed`` entry that took the decision up, if one."""
    ended_after_taken_up: bool = False
    """Whether anything ended after it was taken up: the call recorded a result, or
    (a paused turn) the turn was completed."""
    taken_up_by: tuple[int, str] | None = None
    """(pid, host) of the process that last took it up: the one that started its
    call, if one did (see :func:`overt.engine.liveness.gone`)."""

    @property
    def interrupted(self) -> bool:
        """Approved and taken up, its tool started, and no result was ever recorded
        (the process died inside the tool): never dropped silently, see
        ``approvals list`` and ``approvals resume``."""
        return (self.status == "approved" and self.resumed
                and self.call_started_seq is not None and not self.call_completed)

    @property
    def unstarted(self) -> bool:
        """Approved and taken up (``turn.resumed`` claimed), and since then neither its
        call started nor anything ended: the process that took it up died before the
        tool ran (or is about to run it). Nothing ran; ``approvals list`` and
        ``get_operational_state`` show it."""
        return (self.status == "approved" and self.taken_up_seq is not None
                and self.call_started_seq is None and not self.ended_after_taken_up)

    def overdue(self, now: str | None = None) -> bool:
        """Pending past its expiry (expired, though not yet on the record)."""
        return self.status == "pending" and (now or now_iso()) >= self.expires_at

    @property
    def pauses_turn(self) -> bool:
        """Whether a turn waits on it (otherwise deciding it releases a held call)."""
        return self.mode == "approval" and self.turn_id is not None


def _request(entry: Entry, decided: Entry | None, resumed: bool) -> ApprovalRequest:
    d = entry.event(ApprovalRequested)
    verdict = decided.event(ApprovalDecided) if decided is not None else None
    return ApprovalRequest(
        request_id=d.request_id, mode=d.mode,
        status=verdict.decision if verdict is not None else "pending",
        turn_id=entry.turn_id, session_id=entry.session_id, tool_name=d.tool_name,
        tool_call_id=d.tool_call_id, args_sha256=d.args_sha256, actor=d.actor,
        source=d.source, reason_code=d.reason_code, decision_id=d.decision_id,
        requested_at=entry.at, requested_seq=entry.seq, expires_at=d.expires_at,
        decided_by=verdict.decided_by if verdict is not None else None,
        decided_at=decided.at if decided is not None else None,
        reason_digest=verdict.reason_digest if verdict is not None else None,
        resumed=resumed)


@dataclass(slots=True)
class _Calls:
    """The calls (and turns) of some requests, as the record holds them."""

    started: dict[str, int] = field(default_factory=dict)
    """call id -> seq of its last ``tool_call.started``"""
    completed: set[str] = field(default_factory=set)
    """calls that recorded a ``tool_call.completed`` after starting"""
    ended: dict[str, int] = field(default_factory=dict)
    """call id or turn id -> seq of its last ending"""


class ApprovalBook:
    """Reads requests and records decisions. Stateless: every answer comes from the ledger."""

    def __init__(self, ledger: Ledger, capabilities: Capabilities) -> None:
        self.ledger = ledger
        self.capabilities = capabilities

    async def get(self, request_id: str) -> ApprovalRequest:
        """Raises:
            NotFoundError: no request has that id.
        """
        entry = await self.ledger.claimed("approval.requested", request_id)
        if entry is None:
            raise NotFoundError(f"no approval request {request_id!r}")
        decided = await self.ledger.claimed("approval.decided", request_id)
        resumed = await self.ledger.claimed("turn.resumed", request_id)
        return _request(entry, decided, resumed is not None)

    async def list(self, statuses: Sequence[ApprovalStatus] | None = None) -> list[ApprovalRequest]:
        """Every request, oldest first (only ``statuses`` when given).

        Reads the approval kinds, then only the calls and turns of the requests
        listed that were decided or taken up (:meth:`_calls`): a pending request's
        call has not started (it is held until a decision releases it), so a
        ``pending`` list reads no tool call at all.
        """
        listed, resumed, takers = await self._requests()
        if statuses is not None:
            listed = [r for r in listed if r.status in statuses]
        calls = await self._calls([r for r in listed if r.status != "pending" or r.resumed])
        out = []
        for request in listed:
            call = request.tool_call_id
            if call in calls.started and calls.started[call] > request.requested_seq:
                request = replace(request, call_started_seq=calls.started[call],
                                  call_completed=call in calls.completed)
            taken_up = resumed.get(request.request_id)
            if taken_up is not None:
                after = [calls.ended.get(call, 0)]
                if request.pauses_turn and request.turn_id is not None:
                    after.append(calls.ended.get(request.turn_id, 0))
                request = replace(request, taken_up_seq=taken_up,
                                  ended_after_taken_up=max(after) > taken_up,
                                  taken_up_by=takers.get(request.request_id))
            out.append(request)
        return out

    async def untaken(self, *, decided_before: str) -> builtins.list[ApprovalRequest]:
        """Requests decided before ``decided_before`` that nobody took up (no
        ``turn.resumed``: the process that decided one stopped before resuming it),
        oldest first. Reads the approval kinds alone: nothing of such a request's call
        has started, its resumption comes first."""
        listed, _, _ = await self._requests()
        return [r for r in listed if r.status != "pending" and not r.resumed
                and r.decided_at is not None and r.decided_at < decided_before]

    async def _requests(self) -> tuple[
            builtins.list[ApprovalRequest], dict[str, int], dict[str, tuple[int, str]]]:
        """Every request as its approval entries say (none of its call's fields yet),
        the seq of each one's first ``turn.resumed`` and the process that last took
        each up: read from the approval kinds alone."""
        decided: dict[str, Entry] = {}
        resumed: dict[str, int] = {}
        takers: dict[str, tuple[int, str]] = {}  # the last process to take each up
        requested: list[tuple[Entry, str]] = []
        for e in await self.ledger.entries(kinds=[ApprovalRequested.kind,
                                                  ApprovalDecided.kind, TurnResumed.kind]):
            match e.event():
                case ApprovalDecided(request_id=request_id):
                    decided[request_id] = e
                case TurnResumed(request_id=request_id, pid=pid, host=host):
                    resumed.setdefault(request_id, e.seq)
                    takers[request_id] = (pid, host)
                case ApprovalRequested(request_id=request_id):
                    requested.append((e, request_id))
        return ([_request(e, decided.get(request_id), request_id in resumed)
                 for e, request_id in requested], resumed, takers)

    async def _calls(self, requests: Sequence[ApprovalRequest]) -> _Calls:
        """What became of the calls (and paused turns) of ``requests``: a request in a
        turn finds them among its turn's entries (``audit_log_turn``), one outside a
        turn by its call's id (``audit_log_direct_calls``); a call is recorded in the
        turn of the request that held it, or outside any turn with it."""
        turns = sorted({r.turn_id for r in requests if r.turn_id is not None})
        entries = [e for turn_id in turns for e in await self.ledger.entries(
            turn_id=turn_id, kinds=[ToolCallStarted.kind, ToolCallCompleted.kind,
                                    TurnCompleted.kind])]
        direct = sorted({r.tool_call_id for r in requests if r.turn_id is None})
        if direct:
            entries += await self.ledger.direct_calls(direct)
        calls = _Calls()
        for e in sorted(entries, key=lambda e: e.seq):
            match e.event():
                case ToolCallStarted(tool_call_id=call_id):
                    calls.started[call_id] = e.seq
                case ToolCallCompleted(tool_call_id=call_id):
                    calls.ended[call_id] = e.seq
                    if call_id in calls.started:
                        calls.completed.add(call_id)
                case TurnCompleted() if e.turn_id is not None:
                    calls.ended[e.turn_id] = e.seq
        return calls

    async def decide(self, request_id: str, decision: ApprovalDecision, *, by: Actor,
                     reason: str | None = None) -> ApprovalRequest:
        """Record ``decision`` on a pending request, checking ``by`` may decide it.

        A request already past its expiry is recorded ``expired`` instead of
        what was asked (check the returned status).

        Raises:
            NotFoundError: no such request.
            ApprovalError: already decided (here or by a racing process), or
                ``by`` lacks ``approvals.decide`` (``approvals.expire`` to expire).
        """
        request = await self.get(request_id)
        if request.status != "pending":
            raise ApprovalError(f"request {request_id} was already {request.status} by "
                                f"{request.decided_by} at {request.decided_at}")
        if decision != "expired" and request.overdue():
            decision, by, reason = "expired", EXPIRY_ACTOR, None
        needed = "approvals.expire" if decision == "expired" else "approvals.decide"
        check = self.capabilities.check(by, needed)
        events: list[Event] = [CapabilityChecked(
            turn_id=request.turn_id, session_id=request.session_id, actor=str(by),
            capability=needed, granted=check.granted, reason_code=check.reason_code,
            subject=f"approval:{request_id}", tool_call_id=request.tool_call_id)]
        if not check.granted:
            await self.ledger.record(events)
            raise ApprovalError(f"{by} may not decide approvals: {check.message}")
        contents = {}
        reason_digest = None
        if reason:
            reason_digest = digest_text(reason)
            contents[reason_digest] = reason
        events.append(ApprovalDecided(
            turn_id=request.turn_id, session_id=request.session_id, claim=request_id,
            request_id=request_id, decision=decision, decided_by=str(by),
            reason_digest=reason_digest, tool_call_id=request.tool_call_id,
            tool_name=request.tool_name))
        try:
            recorded = await self.ledger.record(events, contents)
        except LedgerConflict:
            now = await self.get(request_id)
            raise ApprovalError(f"request {request_id} was already {now.status} by "
                                f"{now.decided_by} at {now.decided_at}") from None
        return replace(request, status=decision, decided_by=str(by),
                       decided_at=recorded[-1].at, reason_digest=reason_digest)

    async def reason(self, request: ApprovalRequest) -> str | None:
        """The decider's reason, if one was given and is still held."""
        if request.reason_digest is None:
            return None
        return await self.ledger.content(request.reason_digest)
