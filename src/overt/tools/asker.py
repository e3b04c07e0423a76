"""Who asked: the actor a tool's answer is for, and what of the record it may read.

A tool runs as the agent (``ToolContext.actor``: the gate checks the agent's
capabilities), but its answer reaches whoever sent the turn's message: the actor
the turn's ``turn.started`` names (for a call outside a turn, the actor that made
it). A tool that reads the record answers that actor with only what the API would
show it, by the API's one rule (:mod:`overt.sessions.access`): the sessions it
started, or every session when it holds ``sessions.read_any``, and the approval
requests of those. An entry outside any session (a plugin's ``hook.error`` when
it registered) is nobody's session and is shown to every asker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from overt.errors import UsageError
from overt.events import TurnStarted
from overt.ledger import reads
from overt.ledger.base import Entry
from overt.policy.actors import Actor
from overt.sessions.access import SessionAccess

if TYPE_CHECKING:
    from overt.policy.approvals import ApprovalRequest
    from overt.tools.base import ToolContext


async def asker_of(ctx: ToolContext) -> Actor | None:
    """The actor the turn of ``ctx`` answers (``None``: its turn is not on the record,
    or names no actor overt knows).

    Raises:
        LedgerError: the ledger could not be read.
    """
    if not ctx.turn_id:
        return ctx.actor
    started = await ctx.ledger.entries(turn_id=ctx.turn_id, kinds=[TurnStarted.kind], limit=1)
    if not started:
        return None
    try:
        return Actor.parse(started[0].event(TurnStarted).actor)
    except UsageError:
        return None


@dataclass(frozen=True, slots=True)
class Asker:
    """The asker of one call and the sessions it may read (``None``: all of them)."""

    actor: Actor | None
    sessions: frozenset[str] | None
    access: SessionAccess

    def sees(self, session_id: str | None) -> bool:
        """Whether an entry of ``session_id`` (``None``: outside any session) is shown."""
        return (self.sessions is None or session_id is None or session_id == ""
                or session_id in self.sessions)

    async def approvals(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalRequest]:
        """The requests the asker may see, in their order."""
        if self.actor is None:
            return []
        return await self.access.visible_approvals(self.actor, requests)

    async def count(self, kind: str, since: str | None) -> int:
        """Entries of ``kind`` since ``since`` in the sessions the asker may read."""
        ledger = self.access.ledger
        if self.sessions is None:
            return await ledger.count(kind, since=since)
        return await reads.count_in_sessions(ledger, kind, sorted(self.sessions), since=since)

    async def last_error(self) -> Entry | None:
        """The newest failure (as :meth:`Ledger.last_error` reads them) in a session the
        asker may read, or outside any session."""
        ledger = self.access.ledger
        if self.sessions is None:
            return await ledger.last_error()
        return await reads.newest_failure_in(ledger, sorted(self.sessions))


async def asker(ctx: ToolContext, *, since: str | None = None) -> Asker:
    """Who asked for the call of ``ctx``, with the sessions it may read that were
    active at or after ``since``.

    Raises:
        LedgerError: the ledger could not be read.
    """
    access = SessionAccess(ctx.ledger, ctx.capabilities)
    actor = await asker_of(ctx)
    if actor is None:
        return Asker(None, frozenset(), access)
    return Asker(actor, await access.readable(actor, since=since), access)

