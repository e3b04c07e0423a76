"""Sessions as rows of a table: channel, owner, turns, cost, time, tool calls and
failures; paged by keyset, never by ``OFFSET``.

A session's row starts from its first entry, which is its first turn's
``turn.started`` (as :func:`overt.sessions.book.list_sessions` reads it): the
``newest`` and ``oldest`` orders walk ``turn.started`` entries on the primary key
and keep those that are the first of their session (one look-up on the session's
index each). ``errors`` walks the failures' partial index (``audit_log_failures``)
and lists each session at its newest failure. The page's sums (turns, cost, time,
tool calls, failures) are read for its sessions only, through the session index:
a page costs what its rows and their sessions hold, not what the ledger holds.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Literal

from overt.errors import UsageError
from overt.ledger.reads import session_rows
from overt.ledger.reads.failures import failure_counts, newest_failures
from overt.ledger.reads.session_rows import SessionStart, SessionSums
from overt.sessions.book import SessionInfo

SessionOrder = Literal["newest", "oldest", "errors"]
SESSION_ORDERS: tuple[SessionOrder, ...] = ("newest", "oldest", "errors")
NOTHING = SessionSums(0, None, 0.0, 0.0, 0)
"""The sums of a session none of whose turn entries is left (a prune removed them
after its row was read)."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session as the table shows it; ``key``: the cursor after it."""

    session_id: str
    source: str
    owner: str
    started_at: str
    first_seq: int
    title_digest: str | None
    turns: int = 0
    last_at: str = ""
    cost_usd: float = 0.0
    duration_ms: float = 0.0
    tool_calls: int = 0
    failures: int = 0
    key: int = 0

    @property
    def info(self) -> SessionInfo:
        """As :class:`~overt.sessions.book.SessionInfo` (for its title)."""
        return SessionInfo(self.session_id, self.source, self.owner, self.turns,
                           self.started_at, self.last_at, self.title_digest, self.first_seq)


async def list_session_rows(ledger: object, *, order: SessionOrder = "newest",
                            after: int | None = None, source: str | None = None,
                            owner: str | None = None, sessions: Collection[str] | None = None,
                            since: str | None = None, limit: int = 50) -> list[SessionRow]:
    """At most ``limit`` sessions in ``order`` after the row whose ``key`` is
    ``after`` (``None``: the first page); when given, only ``source``'s, ``owner``'s,
    those of ``sessions`` and those started at or after ``since``.

    Raises:
        UsageError: an unknown order, or a limit under 1.
        LedgerError: the ledger could not be read.
    """
    if order not in SESSION_ORDERS:
        raise UsageError(f"unknown order {order!r}: one of {', '.join(SESSION_ORDERS)}")
    if limit < 1:
        raise UsageError(f"a page holds at least one session, not {limit}")
    if any("\x00" in v for v in (source, owner, since) if v):
        return []
    if order == "errors":
        rows = await _errors(ledger, after, source, owner, sessions, since, limit)
    else:
        found = await session_rows.session_starts(
            ledger, order=order, after=after, source=source, owner=owner,
            sessions=sessions, since=since, limit=limit)
        rows = [_row(start, start.seq) for start in found]
    return await summed(ledger, rows)


async def _errors(ledger: object, after: int | None, source: str | None,
                  owner: str | None, sessions: Collection[str] | None, since: str | None,
                  limit: int) -> list[SessionRow]:
    rows: list[SessionRow] = []
    async for seq, session_id in newest_failures(ledger, "session_id", after, limit):
        picked = await session_rows.session_start(
            ledger, session_id, source=source, owner=owner, sessions=sessions,
            since=since)
        if picked is not None:
            rows.append(_row(picked, seq))
            if len(rows) == limit:
                break
    return rows


def _row(start: SessionStart, key: int) -> SessionRow:
    return SessionRow(start.session_id, start.source, start.actor,
                      start.started_at, start.seq, start.message_digest, key=key)


async def summed(ledger: object, rows: list[SessionRow]) -> list[SessionRow]:
    """``rows`` with their sessions' sums: turns, last activity, cost, time, tool calls
    and failures (two reads for the page, through the session index).

    Raises:
        LedgerError: the ledger could not be read.
    """
    if not rows:
        return rows
    listed = [r.session_id for r in rows]
    sums = await session_rows.session_sums(ledger, listed)
    failures = await failure_counts(ledger, "session_id", listed)
    out = []
    for r in rows:
        found = sums.get(r.session_id, NOTHING)
        out.append(replace(r, turns=found.turns, last_at=found.last_at or r.started_at,
                           cost_usd=found.cost_usd, duration_ms=found.duration_ms,
                           tool_calls=found.tool_calls,
                           failures=failures.get(r.session_id, 0)))
    return out


def from_info(info: SessionInfo) -> SessionRow:
    """A row for a session a search found (its sums read by :func:`summed`)."""
    return SessionRow(info.session_id, info.source, info.owner, info.started_at,
                      info.first_seq, info.title_digest, key=info.first_seq)
