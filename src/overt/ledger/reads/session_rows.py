"""Sessions as rows of a table, paged by keyset: the ``turn.started`` each session
starts with (walked on the primary key, each kept when it is the first of its
session: one look-up on the session's index each), and the sums of a page's sessions
(through the session index). See :mod:`overt.sessions.sessions_table`."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal, NamedTuple

from overt.ledger.chain import entry_data
from overt.ledger.reads.base import selecting
from overt.ledger.reads.filters import start_filters


class SessionStart(NamedTuple):
    """A session's first entry, its first turn's ``turn.started`` (entry ``seq``):
    what it says of the session (``actor``: its owner)."""

    seq: int
    session_id: str
    started_at: str
    source: str
    actor: str
    message_digest: str | None


class SessionSums(NamedTuple):
    """What a session's turns add up to (``last_at``: its newest turn entry's time)."""

    turns: int
    last_at: str | None
    cost_usd: float
    duration_ms: float
    tool_calls: int


def _first(alias: str) -> str:
    """Whether the entry ``alias`` is the first of its session."""
    return (f"{alias}.seq = (SELECT min(p.seq) FROM audit_log p "
            f"WHERE p.session_id = {alias}.session_id)")


def _start(r: Sequence[Any]) -> SessionStart:
    seq, session_id, at, data = r
    started = entry_data(data, int(seq))
    return SessionStart(int(seq), session_id, at, str(started.get("source", "")),
                        str(started.get("actor", "")), started.get("message_digest"))


async def session_starts(ledger: object, *, order: Literal["newest", "oldest"],
                         after: int | None, source: str | None = None,
                         owner: str | None = None, sessions: Collection[str] | None = None,
                         since: str | None = None, limit: int = 50) -> list[SessionStart]:
    """At most ``limit`` sessions' starts, newest or oldest first, after entry
    ``after`` (``None``: from the first); when given, only ``source``'s, ``owner``'s
    (its first turn's actor's), those of ``sessions`` and those started at or after
    ``since``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or an entry is malformed.
    """
    reader, d = selecting(ledger)
    where, params = start_filters(d, source=source, actor=owner, sessions=sessions,
                                  since=since)
    if after is not None:
        where += f" AND s.seq {'<' if order == 'newest' else '>'} {d.ph}"
        params.append(after)
    direction = "DESC" if order == "newest" else "ASC"
    found = await reader.select(
        f"SELECT s.seq, s.session_id, s.at, s.data FROM audit_log s "
        f"WHERE s.kind = 'turn.started' AND s.session_id IS NOT NULL{where} "
        f"AND {_first('s')} ORDER BY s.seq {direction} LIMIT {d.ph}",
        [*params, int(limit)])
    return [_start(r) for r in found]


async def session_start(ledger: object, session_id: str, *,
                        source: str | None = None, owner: str | None = None,
                        sessions: Collection[str] | None = None,
                        since: str | None = None) -> SessionStart | None:
    """The start of ``session_id`` when it passes the filters of
    :func:`session_starts`; else ``None``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or the entry is malformed.
    """
    reader, d = selecting(ledger)
    where, params = start_filters(d, source=source, actor=owner, sessions=sessions,
                                  since=since)
    picked = await reader.select(
        f"SELECT s.seq, s.session_id, s.at, s.data FROM audit_log s WHERE "
        f"s.session_id = {d.ph} AND s.kind = 'turn.started'{where} "
        f"AND {_first('s')}", [session_id, *params])
    return _start(picked[0]) if picked else None


async def session_sums(ledger: object, session_ids: Collection[str]) -> dict[str, SessionSums]:
    """The sums of each of ``session_ids`` that holds a turn entry: turns, last
    activity, cost, time and tool calls (of its completed turns). One read, through
    the session index.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    if not session_ids:
        return {}
    reader, d = selecting(ledger)
    listed = sorted(set(session_ids))
    done = "kind = 'turn.completed'"
    rows = await reader.select(
        f"SELECT session_id, sum(CASE WHEN kind = 'turn.started' THEN 1 ELSE 0 END), "
        f"max(at), sum(CASE WHEN {done} THEN {d.number('cost_usd')} END), "
        f"sum(CASE WHEN {done} THEN {d.number('duration_ms')} END), "
        f"sum(CASE WHEN {done} THEN {d.number('tool_calls')} END) FROM audit_log "
        f"WHERE session_id IN ({d.phs(len(listed))}) AND kind IN "
        "('turn.started', 'turn.completed') GROUP BY session_id", listed)
    return {r[0]: SessionSums(int(r[1] or 0), r[2], float(r[3] or 0), float(r[4] or 0),
                              int(r[5] or 0)) for r in rows}
