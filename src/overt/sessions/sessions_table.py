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

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from overt.errors import UsageError
from overt.ledger.chain import entry_data
from overt.ledger.sql import POSTGRES, SQLITE, Dialect, failure_condition
from overt.sessions.book import LEGACY_OWNER, SessionInfo, _reader
from overt.sessions.failures import newest_failures

SessionOrder = Literal["newest", "oldest", "errors"]
SESSION_ORDERS: tuple[SessionOrder, ...] = ("newest", "oldest", "errors")


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


def _dialect(ledger: Any) -> Dialect:
    return SQLITE if getattr(ledger, "backend", "sqlite") == "sqlite" else POSTGRES


def _first(d: Dialect, alias: str) -> str:
    """Whether the entry ``alias`` is the first of its session."""
    return (f"{alias}.seq = (SELECT min(p.seq) FROM audit_log p "
            f"WHERE p.session_id = {alias}.session_id)")


def _filters(d: Dialect, source: str | None, owner: str | None,
             sessions: Collection[str] | None, since: str | None, legacy_owner: str,
             params: list[Any]) -> str:
    where = ""
    if source is not None:
        where += f" AND {d.text('source', 's.data')} = {d.ph}"
        params.append(source)
    if owner is not None:
        where += f" AND coalesce(nullif({d.text('actor', 's.data')}, ''), {d.ph}) = {d.ph}"
        params.extend([legacy_owner, owner])
    if sessions is not None:
        listed = sorted(sessions) or [""]
        where += f" AND s.session_id IN ({d.phs(len(listed))})"
        params.extend(listed)
    if since is not None:
        where += f" AND s.at >= {d.ph}"
        params.append(since)
    return where


async def list_session_rows(ledger: object, *, order: SessionOrder = "newest",
                            after: int | None = None, source: str | None = None,
                            owner: str | None = None, sessions: Collection[str] | None = None,
                            since: str | None = None, limit: int = 50,
                            legacy_owner: str = LEGACY_OWNER) -> list[SessionRow]:
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
    reader = _reader(ledger)
    d = _dialect(ledger)
    if order == "errors":
        rows = await _errors(reader, d, after, source, owner, sessions, since, limit,
                             legacy_owner)
    else:
        params: list[Any] = []
        where = _filters(d, source, owner, sessions, since, legacy_owner, params)
        if after is not None:
            where += f" AND s.seq {'<' if order == 'newest' else '>'} {d.ph}"
            params.append(after)
        direction = "DESC" if order == "newest" else "ASC"
        found = await reader.select(
            f"SELECT s.seq, s.session_id, s.at, s.data FROM audit_log s "
            f"WHERE s.kind = 'turn.started' AND s.session_id IS NOT NULL{where} "
            f"AND {_first(d, 's')} ORDER BY s.seq {direction} LIMIT {d.ph}",
            [*params, int(limit)])
        rows = [_row(r, legacy_owner, int(r[0])) for r in found]
    return await summed(ledger, rows)


async def _errors(reader: Any, d: Dialect, after: int | None, source: str | None,
                  owner: str | None, sessions: Collection[str] | None, since: str | None,
                  limit: int, legacy_owner: str) -> list[SessionRow]:
    rows: list[SessionRow] = []
    async for seq, session_id in newest_failures(reader, d, "session_id", after, limit):
        params: list[Any] = []
        where = _filters(d, source, owner, sessions, since, legacy_owner, params)
        picked = await reader.select(
            f"SELECT s.seq, s.session_id, s.at, s.data FROM audit_log s WHERE "
            f"s.session_id = {d.ph} AND s.kind = 'turn.started'{where} "
            f"AND {_first(d, 's')}", [session_id, *params])
        if picked:
            rows.append(_row(picked[0], legacy_owner, seq))
            if len(rows) == limit:
                break
    return rows


def _row(r: Sequence[Any], legacy_owner: str, key: int) -> SessionRow:
    seq, session_id, at, data = r
    started = entry_data(data, int(seq))
    return SessionRow(session_id, str(started.get("source", "")),
                      str(started.get("actor") or legacy_owner), at, int(seq),
                      started.get("message_digest"), key=key)


async def summed(ledger: object, rows: list[SessionRow]) -> list[SessionRow]:
    """``rows`` with their sessions' sums: turns, last activity, cost, time, tool calls
    and failures (two reads for the page, through the session index).

    Raises:
        LedgerError: the ledger could not be read.
    """
    if not rows:
        return rows
    reader = _reader(ledger)
    d = _dialect(ledger)
    listed = sorted({r.session_id for r in rows})
    done = "kind = 'turn.completed'"
    sums = {r[0]: r[1:] for r in await reader.select(
        f"SELECT session_id, sum(CASE WHEN kind = 'turn.started' THEN 1 ELSE 0 END), "
        f"max(at), sum(CASE WHEN {done} THEN {d.number('cost_usd')} END), "
        f"sum(CASE WHEN {done} THEN {d.number('duration_ms')} END), "
        f"sum(CASE WHEN {done} THEN {d.number('tool_calls')} END) FROM audit_log "
        f"WHERE session_id IN ({d.phs(len(listed))}) AND kind IN "
        "('turn.started', 'turn.completed') GROUP BY session_id", listed)}
    failures = {s: int(n) for s, n in await reader.select(
        f"SELECT session_id, count(*) FROM audit_log WHERE session_id IN "
        f"({d.phs(len(listed))}) AND ({failure_condition(d)}) GROUP BY session_id", listed)}
    out = []
    for r in rows:
        turns, last, cost, duration, calls = sums.get(r.session_id, (0, r.started_at, 0, 0, 0))
        out.append(replace(r, turns=int(turns or 0), last_at=last or r.started_at,
                           cost_usd=float(cost or 0), duration_ms=float(duration or 0),
                           tool_calls=int(calls or 0),
                           failures=failures.get(r.session_id, 0)))
    return out


def from_info(info: SessionInfo) -> SessionRow:
    """A row for a session a search found (its sums read by :func:`summed`)."""
    return SessionRow(info.session_id, info.source, info.owner, info.started_at,
                      info.first_seq, info.title_digest, key=info.first_seq)
