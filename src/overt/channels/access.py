"""What a channel's caller may reach: sessions it owns (or all, with ``sessions.read_any``),
turns and approval requests of those sessions.

Every surface (HTTP list/read/post/stream, MCP ``ask``, ``trail``, approvals)
asks here, so one rule holds on all of them. A session, turn or approval the
caller may not reach is answered exactly as one that does not exist
(:class:`Refused`, the same message for both: no 403-versus-404 oracle), and
the refusal is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from overt.errors import NotFoundError
from overt.events import CapabilityChecked
from overt.ledger.canonical import digest_text
from overt.policy.actors import Actor
from overt.sessions import session_info

if TYPE_CHECKING:
    from overt.policy.approvals import ApprovalRequest
    from overt.runtime import Runtime

READ_ANY = "sessions.read_any"
NO_SESSION = "no such session"
NO_TURN = "no such turn"
NO_APPROVAL = "no such approval request"


class Refused(NotFoundError):
    """The caller may not reach it, or it does not exist: the message does not say which."""


async def owner_of(runtime: Runtime, session_id: str) -> str | None:
    """The actor that started ``session_id`` (``None``: no such session)."""
    info = await session_info(runtime.ledger, session_id)
    return info.owner if info is not None else None


def may_reach(runtime: Runtime, actor: Actor, owner: str) -> bool:
    """Whether ``actor`` may read and continue a session ``owner`` started."""
    return str(actor) == owner or runtime.gate.capabilities.check(actor, READ_ANY).granted


async def refuse(runtime: Runtime, actor: Actor, what: str, key: str, *, surface: str,
                 message: str, exists: bool) -> Refused:
    """Record that ``actor`` was refused ``what`` (``session``, ``turn``, ``approval``)
    named ``key`` on ``surface``, and the error to raise (its message the same either
    way). The record says why (``not_found`` or ``not_owner``: the operator may know
    which, the caller may not), with the key as a digest: the caller chose it."""
    await runtime.ledger.record([CapabilityChecked(
        actor=str(actor), capability=READ_ANY, granted=False,
        reason_code="not_owner" if exists else "not_found",
        subject=f"{surface} {what}:{digest_text(key)}")])
    return Refused(message)


async def session_for(runtime: Runtime, actor: Actor, session_id: str, *,
                      surface: str) -> str:
    """The owner of ``session_id`` when ``actor`` may reach it.

    Raises:
        Refused: no such session, or not ``actor``'s (recorded).
    """
    owner = await owner_of(runtime, session_id)
    if owner is None or not may_reach(runtime, actor, owner):
        raise await refuse(runtime, actor, "session", session_id, surface=surface,
                           message=NO_SESSION, exists=owner is not None)
    return owner


async def turn_for(runtime: Runtime, actor: Actor, turn_id: str, *, surface: str) -> None:
    """Pass when ``actor`` may reach the session of turn ``turn_id``.

    Raises:
        Refused: no such turn, or its session is not ``actor``'s (recorded).
    """
    started = await runtime.ledger.entries(turn_id=turn_id, kinds=["turn.started"], limit=1)
    session = started[0].session_id if started else None
    owner = await owner_of(runtime, session) if session else None
    if owner is None or not may_reach(runtime, actor, owner):
        raise await refuse(runtime, actor, "turn", turn_id, surface=surface, message=NO_TURN,
                           exists=owner is not None)


async def approval_visible(runtime: Runtime, actor: Actor, request: ApprovalRequest, *,
                           owners: dict[str, str | None] | None = None) -> bool:
    """Whether ``actor`` may see ``request``: it may reach the request's session, or
    the request is of a call outside any turn (a direct tool call) that it made.
    ``owners``: session -> owner already looked up (filled as it goes)."""
    if runtime.gate.capabilities.check(actor, READ_ANY).granted:
        return True
    known = owners if owners is not None else {}
    session = request.session_id
    if session and session not in known:
        known[session] = await owner_of(runtime, session)
    owner = known.get(session) if session else None
    return (owner if owner is not None else request.actor) == str(actor)


async def approval_for(runtime: Runtime, actor: Actor, request_id: str, *,
                       surface: str) -> ApprovalRequest:
    """The approval request ``request_id`` when ``actor`` may see it.

    Raises:
        Refused: no such request, or not one ``actor`` may see (recorded).
    """
    try:
        request = await runtime.approvals.get(request_id)
    except NotFoundError:
        request = None
    if request is None or not await approval_visible(runtime, actor, request):
        raise await refuse(runtime, actor, "approval", request_id, surface=surface,
                           message=NO_APPROVAL, exists=request is not None)
    return request


async def visible_approvals(runtime: Runtime, actor: Actor,
                            requests: list[ApprovalRequest]) -> list[ApprovalRequest]:
    """The requests ``actor`` may see, in their order."""
    owners: dict[str, str | None] = {}
    return [r for r in requests if await approval_visible(runtime, actor, r, owners=owners)]
