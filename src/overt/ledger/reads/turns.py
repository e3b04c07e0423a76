"""Turns as rows of a table, paged by keyset, never by ``OFFSET``: each turn's
``turn.started`` joined (through the turn's index) to its ``turn.completed``. The
orders and the indexes each walks are described in :mod:`overt.sessions.turns_table`."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal, NamedTuple

from overt.ledger.chain import entry_data
from overt.ledger.reads.base import selecting
from overt.ledger.reads.filters import start_filters
from overt.ledger.sql import turn_value

WalkOrder = Literal["newest", "oldest", "cost", "duration"]


class TurnRecord(NamedTuple):
    """A turn as its ``turn.started`` (entry ``seq``) and its ``turn.completed`` (entry
    ``done_seq``; every field of it ``None`` while the turn has not ended) record it."""

    seq: int
    turn_id: str
    session_id: str | None
    started_at: str
    source: str
    actor: str
    model: str
    message_digest: str | None
    done_seq: int | None
    status: str | None
    error_type: str | None
    cost_usd: float | None
    duration_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    tool_calls: int | None


_COLUMNS = "s.seq, s.turn_id, s.session_id, s.at, s.data, c.seq, c.data"
_COMPLETED = ("LEFT JOIN audit_log c ON c.turn_id = s.turn_id AND c.kind = 'turn.completed' "
              "AND c.seq > s.seq")


def _record(r: Sequence[Any]) -> TurnRecord:
    seq, turn_id, session_id, at, data, done_seq, done = r
    started = entry_data(data, int(seq))
    ended = entry_data(done, int(done_seq)) if done is not None else {}
    return TurnRecord(int(seq), turn_id, session_id or None, at,
                      str(started.get("source", "")), str(started.get("actor", "")),
                      str(started.get("model", "")), started.get("message_digest"),
                      int(done_seq) if done is not None else None,
                      ended.get("status"), ended.get("error_type"), ended.get("cost_usd"),
                      ended.get("duration_ms"), ended.get("input_tokens"),
                      ended.get("output_tokens"), ended.get("tool_calls"))


async def turn_records(ledger: object, *, order: WalkOrder, after: tuple[float, int] | None,
                       source: str | None = None, actor: str | None = None,
                       sessions: Collection[str] | None = None, since: str | None = None,
                       limit: int = 50) -> list[TurnRecord]:
    """At most ``limit`` turns in ``order``, after the row at ``after`` (``(value,
    seq)``: the value is the cost or the duration for those orders, unused by the
    others, and the seq that of the start, or of the completion for ``cost`` and
    ``duration``; ``None``: the first page), only ``source``'s, ``actor``'s, those of
    ``sessions`` (``None``: any) and those started (for ``cost`` and ``duration``:
    ended) at or after ``since``, when given. ``cost`` and ``duration`` list ended
    turns only, the most expensive or slowest first.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or an entry is malformed.
    """
    reader, d = selecting(ledger)
    where, params = start_filters(d, source=source, actor=actor, sessions=sessions,
                                  since=since)
    if order in ("newest", "oldest"):
        if after is not None:
            where += f" AND s.seq {'<' if order == 'newest' else '>'} {d.ph}"
            params.append(after[1])
        direction = "DESC" if order == "newest" else "ASC"
        statement = (f"SELECT {_COLUMNS} FROM audit_log s {_COMPLETED} "
                     f"WHERE s.kind = 'turn.started'{where} ORDER BY s.seq {direction} "
                     f"LIMIT {d.ph}")
    else:
        value = turn_value(d, "cost_usd" if order == "cost" else "duration_ms", "c")
        if since is not None:  # still walked on the value's index, the time a filter
            where += f" AND c.at >= {d.ph}"
            params.append(since)
        if after is not None:
            where += f" AND ({value}, c.seq) < ({d.ph}, {d.ph})"
            params.extend(after)
        statement = (f"SELECT {_COLUMNS} FROM audit_log c JOIN audit_log s ON "
                     f"s.turn_id = c.turn_id AND s.kind = 'turn.started' AND s.seq < c.seq "
                     f"WHERE c.kind = 'turn.completed'{where} "
                     f"ORDER BY {value} DESC, c.seq DESC LIMIT {d.ph}")
    params.append(int(limit))
    return [_record(r) for r in await reader.select(statement, params)]


async def turn_record(ledger: object, turn_id: str, *, source: str | None = None,
                      actor: str | None = None, sessions: Collection[str] | None = None,
                      since: str | None = None) -> TurnRecord | None:
    """The turn ``turn_id`` when it passes the filters of :func:`turn_records` (its
    start's); else ``None``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or an entry is malformed.
    """
    reader, d = selecting(ledger)
    where, params = start_filters(d, source=source, actor=actor, sessions=sessions,
                                  since=since)
    picked = await reader.select(
        f"SELECT {_COLUMNS} FROM audit_log s {_COMPLETED} WHERE s.turn_id = "
        f"{d.ph} AND s.kind = 'turn.started'{where} ORDER BY s.seq LIMIT 1",
        [turn_id, *params])
    return _record(picked[0]) if picked else None
