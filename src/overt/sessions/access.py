"""Who may reach a session: its owner, or an actor holding ``sessions.read_any``.

Every surface asks here (HTTP list/read/post/stream, MCP ``ask``, ``trail`` and
approvals, ``overt trail``/``export --as``), so one rule holds on all of them.
A session, turn or approval request the caller may not reach is answered
exactly as one that does not exist (:class:`Refused`, the same message for
both: no 403-versus-404 oracle), and the refusal is recorded as a
``capability.checked`` entry (capability ``sessions.read_any``, reason
``not_owner`` or ``not_found``: the operator may know which, the caller may not;
the id as a digest, since the caller chose it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from overt.errors import NotFoundError
from overt.events import CapabilityChecked
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities, CapabilityCheck
from overt.sessions.book import list_sessions, session_owner

if TYPE_CHECKING:
    from overt.policy.approvals import ApprovalBook, ApprovalRequest

READ_ANY = "sessions.read_any"
NO_SESSION = "no such session"
NO_TURN = "no such turn"
NO_TURN_OR_SESSION = "no such turn or session"
NO_APPROVAL = "no such approval request"
_EVERY = 2**62
"""A listing's limit that is no limit (one actor's sessions, all of them)."""


class Refused(NotFoundError):
    """The caller may not reach it, or it does not exist: the message does not say which."""


@dataclass(frozen=True, slots=True)
class Reach:
    """Whether an actor may reach a session, and why (``owner``, ``read_any``,
    ``not_owner``, ``not_found``)."""

    granted: bool
    reason_code: str


def may_reach(capabilities: Capabilities, actor: Actor, owner: str | None) -> Reach:
    """Whether ``actor`` may read and continue a session ``owner`` started (``None``:
    there is no such session)."""
    if owner is None:
        return Reach(False, "not_found")
    if str(actor) == owner:
        return Reach(True, "owner")
    check: CapabilityCheck = capabilities.check(actor, READ_ANY)
    return Reach(True, "read_any") if check.granted else Reach(False, "not_owner")


@dataclass(frozen=True, slots=True)
class SessionAccess:
    """The checks of one surface: the ledger they read and record on, the grants they
    read. ``surface`` names where a refusal happened (``http:GET /v1/sessions/{id}``,
    ``mcp:claude-code:ask``, ``cli:trail``) when a check does not say."""

    ledger: Ledger
    capabilities: Capabilities

    async def owner_of(self, session_id: str) -> str | None:
        """The actor that started ``session_id`` (``None``: no such session).

        Raises:
            LedgerError: the ledger could not be read.
        """
        if not _storable(session_id):
            return None
        return await session_owner(self.ledger, session_id)

    def reads_any(self, actor: Actor) -> bool:
        """Whether ``actor`` holds ``sessions.read_any``."""
        return self.capabilities.check(actor, READ_ANY).granted

    async def readable(self, actor: Actor, *, since: str | None = None
                       ) -> frozenset[str] | None:
        """The sessions ``actor`` may reach (:func:`may_reach`), active at or after
        ``since``: ``None`` for every session (it holds ``sessions.read_any``), else
        the ones it started.

        Raises:
            LedgerError: the ledger could not be read.
        """
        if self.reads_any(actor):
            return None
        owned = await list_sessions(self.ledger, owner=str(actor), since=since,
                                    limit=_EVERY)
        return frozenset(info.session_id for info in owned
                         if may_reach(self.capabilities, actor, info.owner).granted)

    async def refuse(self, actor: Actor, what: str, key: str, reach: Reach, *,
                     surface: str, message: str) -> Refused:
        """Record that ``actor`` was refused ``what`` (``session``, ``turn``,
        ``approval``) named ``key`` on ``surface``; the error to raise.

        Raises:
            LedgerError: the refusal could not be recorded.
        """
        await self.ledger.record([CapabilityChecked(
            actor=str(actor), capability=READ_ANY, granted=False,
            reason_code=reach.reason_code, subject=f"{surface} {what}:{digest_text(key)}")])
        return Refused(message)

    async def session(self, actor: Actor, session_id: str, *, surface: str,
                      message: str = NO_SESSION) -> str:
        """The owner of ``session_id`` when ``actor`` may reach it.

        Raises:
            Refused: no such session, or not ``actor``'s (recorded).
            LedgerError: the ledger could not be read or written.
        """
        owner = await self.owner_of(session_id)
        reach = may_reach(self.capabilities, actor, owner)
        if not reach.granted or owner is None:
            raise await self.refuse(actor, "session", session_id, reach, surface=surface,
                                    message=message)
        return owner

    async def turn_session(self, turn_id: str) -> str | None:
        """The session of turn ``turn_id`` (``None``: no such turn)."""
        if not _storable(turn_id):
            return None
        started = await self.ledger.entries(turn_id=turn_id, kinds=["turn.started"], limit=1)
        return started[0].session_id if started else None

    async def turn(self, actor: Actor, turn_id: str, *, surface: str,
                   message: str = NO_TURN) -> str:
        """The session of turn ``turn_id`` when ``actor`` may reach it.

        Raises:
            Refused: no such turn, or its session is not ``actor``'s (recorded).
            LedgerError: the ledger could not be read or written.
        """
        session = await self.turn_session(turn_id)
        owner = await self.owner_of(session) if session else None
        reach = may_reach(self.capabilities, actor, owner)
        if not reach.granted or session is None:
            raise await self.refuse(actor, "turn", turn_id, reach, surface=surface,
                                    message=message)
        return session

    async def approval_visible(self, actor: Actor, request: ApprovalRequest, *,
                               owners: dict[str, str | None] | None = None) -> bool:
        """Whether ``actor`` may see ``request``: it may reach the request's session,
        or the request is of a call outside any turn (a direct tool call) that it
        made. ``owners``: session -> owner already looked up (filled as it goes)."""
        if self.reads_any(actor):
            return True
        known = owners if owners is not None else {}
        session = request.session_id
        if session and session not in known:
            known[session] = await self.owner_of(session)
        owner = known.get(session) if session else None
        return (owner if owner is not None else request.actor) == str(actor)

    async def approval(self, actor: Actor, book: ApprovalBook, request_id: str, *,
                       surface: str) -> ApprovalRequest:
        """The approval request ``request_id`` when ``actor`` may see it.

        Raises:
            Refused: no such request, or not one ``actor`` may see (recorded).
            LedgerError: the ledger could not be read or written.
        """
        try:
            request: ApprovalRequest | None = (await book.get(request_id)
                                               if _storable(request_id) else None)
        except NotFoundError:
            request = None
        if request is None or not await self.approval_visible(actor, request):
            reach = Reach(False, "not_found" if request is None else "not_owner")
            raise await self.refuse(actor, "approval", request_id, reach, surface=surface,
                                    message=NO_APPROVAL)
        return request

    async def visible_approvals(self, actor: Actor, requests: Sequence[ApprovalRequest],
                                ) -> list[ApprovalRequest]:
        """The requests ``actor`` may see, in their order."""
        owners: dict[str, str | None] = {}
        return [r for r in requests
                if await self.approval_visible(actor, r, owners=owners)]


def _storable(key: str) -> bool:
    """Whether an id a caller sent could name something on the record: PostgreSQL
    refuses text holding NUL (the lookup would fail as if the database were down),
    so on either backend such an id names nothing."""
    return "\x00" not in key
