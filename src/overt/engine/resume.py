"""Taking up what a decided approval request released, from the ledger alone.

A request that paused a turn resumes the turn (:meth:`Engine.resume`) from
its checkpoint. A request with no paused turn (a quarantined call, or one a
direct run held) releases the held call itself: approved, it runs once
through the gate on the ``review`` path; denied or expired, it is closed.
Either way the first step is the ``turn.resumed`` claim, so a request is
acted on once however many processes try.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from overt.engine.checkpoint import Checkpoint
from overt.engine.direct import DirectResult, run_direct
from overt.engine.loop import Engine
from overt.engine.record import canonical_or_repr, resumption
from overt.errors import LedgerIntegrityError, UsageError
from overt.events import (
    ApprovalDecision,
    ApprovalRequested,
    PolicyDecided,
    TurnCompleted,
    TurnPaused,
)
from overt.ids import new_ulid
from overt.ledger.base import Entry
from overt.ledger.canonical import canonical_json, chain_hash, digest_text, entry_payload
from overt.ledger.chain import clean_text
from overt.policy.actors import Actor
from overt.policy.approvals import ApprovalRequest
from overt.policy.capabilities import tool_capability
from overt.types import ResponseResult


@dataclass(frozen=True, slots=True)
class Resumed:
    """What resuming a request produced: a turn's answer, or a released call's result."""

    request: ApprovalRequest
    result: ResponseResult | None = None
    released: DirectResult | None = None
    handed_back: str | None = None
    """Why this process left the paused turn to another (it ran on a model that
    cannot be built here); the decision stands and that process answers."""
    held_call: Entry | None = None
    """An interrupted call held for the operator: its ``tool_call.started`` record."""


async def load_checkpoint(engine: Engine, request: ApprovalRequest) -> Checkpoint:
    """The checkpoint of the turn paused on ``request``, checked against the request.

    The request and the pause must be the entries recorded (each hashes to its
    recorded hash), and the checkpoint must hold the call the request was made for.
    A call that is not is refused on the record (a ``policy.decision`` denying it,
    ``approval_binding_broken``) and never runs.

    Raises:
        LedgerIntegrityError: no checkpoint, or it holds another call than the
            one the request was made for (tool or arguments differ), or the request
            or the pause was changed behind the ledger's back.
    """
    entries = await engine.ledger.entries(turn_id=request.turn_id,
                                          kinds=[TurnPaused.kind, ApprovalRequested.kind])
    paused = [(e, e.event(TurnPaused)) for e in entries if e.kind == TurnPaused.kind]
    held = [(e, pause) for e, pause in paused if pause.request_id == request.request_id]
    if not held:
        raise LedgerIntegrityError(f"turn {request.turn_id} has no pause for request "
                                   f"{request.request_id}")
    entry, pause = held[0]
    asked = [e for e in entries if e.seq == request.requested_seq]
    changed = [e for e in (*asked, entry) if not _intact(e)]
    if changed:
        await _refuse_broken(engine, request, f"entry {changed[0].seq} ({changed[0].kind}) "
                             "does not hash to its recorded hash")
    body = await engine.ledger.content(pause.checkpoint_digest, seq=entry.seq)
    if body is None:
        raise LedgerIntegrityError(f"the checkpoint of turn {request.turn_id} is not held "
                                   "(pruned or redacted); it cannot be resumed")
    checkpoint = Checkpoint.from_json(body)
    if checkpoint.held.name != request.tool_name or _args_digest(checkpoint) != request.args_sha256:
        await _refuse_broken(engine, request, "the checkpoint holds another call than the one "
                             "approved")
    return checkpoint


def _intact(entry: Entry) -> bool:
    """Whether ``entry`` hashes to its recorded hash (its data unchanged since)."""
    payload = entry_payload(entry.seq, entry.id, entry.kind, entry.at, entry.turn_id,
                            entry.session_id, canonical_json(entry.data))
    return chain_hash(entry.prev_hash, payload) == entry.hash


async def _refuse_broken(engine: Engine, request: ApprovalRequest, problem: str) -> None:
    """Record that the call approved under ``request`` is refused, then raise."""
    tool = engine.tools.get(request.tool_name)
    await engine.ledger.record([PolicyDecided(
        turn_id=request.turn_id, session_id=request.session_id, decision_id=new_ulid(),
        tool_call_id=request.tool_call_id, tool_name=request.tool_name, effect="deny",
        reason_code="approval_binding_broken",
        message="the call on record is not the one approved; it was not run",
        rule="approval_binding", rules_evaluated=["approval_binding"],
        args_sha256=request.args_sha256, actor=request.actor, source=request.source,
        route=engine.settings.route, mutating=tool is None or not tool.read_only,
        capability=tool_capability(request.tool_name,
                                   tool.capability if tool is not None else None),
        capability_granted=False, path="resume", approval_request_id=request.request_id,
        policy_digest=engine.gate.policy.digest)])
    raise LedgerIntegrityError(f"request {request.request_id} of turn {request.turn_id}: "
                               f"{problem}; not resumed, and the refusal is recorded")


def _args_digest(checkpoint: Checkpoint) -> str:
    return digest_text(clean_text(canonical_or_repr(checkpoint.held.arguments)))


async def resume_request(engine: Engine, request: ApprovalRequest, *, by: Actor,
                         reason: str | None = None) -> Resumed:
    """Act on a decided request once (see the module docstring).

    Raises:
        LedgerConflict: it was already taken up (here or in another process).
        LedgerIntegrityError: its checkpoint or held arguments are missing or
            do not match the request.
        UsageError: the request is still pending.
    """
    if request.status == "pending":
        raise UsageError(f"request {request.request_id} is not decided yet")
    decision: ApprovalDecision = request.status
    if request.pauses_turn:
        checkpoint = await load_checkpoint(engine, request)
        outcome = await engine.resume(checkpoint, request.request_id, decision,
                                      resumed_by=str(by), reason=reason)
        return Resumed(request, result=outcome.result)
    await engine.ledger.record([resumption(request.turn_id, request.session_id,
                                           request.request_id, decision, str(by))])
    if decision != "approved":
        return Resumed(request)
    return await _run_held(engine, request, "the call cannot be released")


async def take_up_interrupted(engine: Engine, request: ApprovalRequest, *,
                              by: Actor) -> Resumed:
    """Take up an approved call whose tool started and recorded no result
    (:attr:`ApprovalRequest.interrupted`).

    A tool declared ``idempotent`` runs again, once per interruption however many
    processes try (a claim on the ``tool_call.started`` it follows); any other tool
    is held for the operator: nothing runs, and its ``tool_call.started`` record
    comes back in ``held_call``.

    Raises:
        LedgerConflict: another process took this interruption up first.
        LedgerIntegrityError: the call's arguments are no longer held.
        UsageError: the request is not an interrupted call.
    """
    if not request.interrupted or request.call_started_seq is None:
        raise UsageError(f"request {request.request_id} has no interrupted call")
    calls = (await engine.ledger.entries(turn_id=request.turn_id, kinds=["tool_call.started"])
             if request.turn_id is not None  # else every call of the ledger: by its id
             else await engine.ledger.direct_calls([request.tool_call_id]))
    started = [e for e in calls if e.seq == request.call_started_seq]
    tool = engine.tools.get(request.tool_name)
    if tool is None or not tool.idempotent:
        return Resumed(request, held_call=started[0] if started else None)
    claim = resumption(request.turn_id, request.session_id, request.request_id, "approved",
                       str(by))
    await engine.ledger.record([replace(
        claim, claim=f"rerun:{request.request_id}:{request.call_started_seq}")])
    resumed = await _run_held(engine, request, "the call cannot run again")
    if request.pauses_turn:
        await _close_interrupted_turn(engine, request)
    return resumed


async def _close_interrupted_turn(engine: Engine, request: ApprovalRequest) -> None:
    """The turn whose call was re-run ends ``interrupted``: the model that asked for the
    call is not asked again (its process died mid-turn), so the turn is closed on the
    record with the re-run as its one tool call, not left in progress."""
    if await engine.ledger.entries(turn_id=request.turn_id, kinds=["turn.completed"]):
        return
    await engine.ledger.record([TurnCompleted(
        turn_id=request.turn_id, session_id=request.session_id, status="interrupted",
        reply_digest=None, tools_used=[request.tool_name], tool_calls=1, model_calls=0,
        input_tokens=0, output_tokens=0, cost_usd=0.0, duration_ms=0.0)])


async def _run_held(engine: Engine, request: ApprovalRequest, what: str) -> Resumed:
    """Run the call ``request`` held, once, on the ``review`` path, with the arguments
    the content tier keeps for it.

    Raises:
        LedgerIntegrityError: the arguments are no longer held, or are not an object.
    """
    body = await engine.ledger.content(request.args_sha256, seq=request.requested_seq)
    if body is None:
        raise LedgerIntegrityError(f"the arguments of request {request.request_id} are not "
                                   f"held (pruned or redacted); {what}")
    arguments = json.loads(body)
    if not isinstance(arguments, dict):
        raise LedgerIntegrityError(f"request {request.request_id} holds no argument object")
    released = await run_direct(
        engine, request.tool_name, arguments, actor=Actor.parse(request.actor),
        source=request.source, path="review", approved_request=request.request_id,
        turn_id=request.turn_id, session_id=request.session_id,
        tool_call_id=request.tool_call_id)
    return Resumed(request, released=released)
