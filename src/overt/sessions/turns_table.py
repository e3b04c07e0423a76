"""Turns as rows of a table: who asked on which channel, how it ended, what it cost,
how long it took, how many tools it called; pages by keyset, never by ``OFFSET``.

A row is a turn's ``turn.started`` entry joined (through the turn's index) to its
``turn.completed``, both read from the chain: no table of its own. A page is the
rows after a :class:`Cursor` (the last row of the page before), so the cost of a
page is that of the rows it shows and the entries passed over to find them, not of
the pages before it, over a ledger of a million turns as over one of ten.

Orders:

- ``newest`` / ``oldest``: by the turn's start (its ``seq``), walked on the primary key;
- ``errors``: turns with a failure (a turn that did not complete, a tool call that was
  not ``ok``, a model error, a plugin's error), newest failure first, walked on the
  failures' partial index (``audit_log_failures``), each turn once;
- ``cost`` / ``duration``: the most expensive or slowest first, keyset on the value
  and ``seq``, walked on the index of each (``audit_log_turn_cost``,
  ``audit_log_turn_duration``, migration 20); ``since`` filters the walk.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from overt.errors import UsageError
from overt.ledger.chain import entry_data
from overt.ledger.sql import (
    POSTGRES,
    SQLITE,
    Dialect,
    failure_condition,
    turn_value,
)
from overt.sessions.book import _reader
from overt.sessions.failures import newest_failures

Order = Literal["newest", "oldest", "errors", "cost", "duration"]
ORDERS: tuple[Order, ...] = ("newest", "oldest", "errors", "cost", "duration")


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One turn as the table shows it (``status`` ``None``: not ended yet)."""

    seq: int
    turn_id: str
    session_id: str | None
    started_at: str
    source: str
    actor: str
    model: str
    status: str | None
    error_type: str | None
    cost_usd: float | None
    duration_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    tool_calls: int | None
    message_digest: str | None
    key: tuple[float, int]
    """Where this row sits in its order (value, seq): the cursor after it."""
    failures: int = 0
    """Entries of the turn that record a failure (a call not ``ok``, a model error, a
    plugin's error, an ending other than ``completed``): a turn that completed after
    a failed call is not shown as a success."""


@dataclass(frozen=True, slots=True)
class Cursor:
    """The page after the row at ``(value, seq)`` of an order (``value`` unused by
    ``newest``, ``oldest`` and ``errors``)."""

    value: float
    seq: int

    def text(self) -> str:
        return f"{self.value!r}:{self.seq}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """A cursor from its :meth:`text`.

        Raises:
            UsageError: not one this table wrote.
        """
        value, _, seq = text.partition(":")
        try:
            cursor = cls(float(value), int(seq))
        except ValueError:
            cursor = None
        if cursor is None or not math.isfinite(cursor.value) or not 0 <= cursor.seq < 2**63:
            raise UsageError(f"page cursor {text!r} is not one this table wrote "
                             "(VALUE:SEQ); start again from the first page")
        return cursor


def _dialect(ledger: Any) -> Dialect:
    return SQLITE if getattr(ledger, "backend", "sqlite") == "sqlite" else POSTGRES


_COLUMNS = "s.seq, s.turn_id, s.session_id, s.at, s.data, c.seq, c.data"


def _completed(d: Dialect) -> str:
    return ("LEFT JOIN audit_log c ON c.turn_id = s.turn_id AND c.kind = 'turn.completed' "
            "AND c.seq > s.seq")


def _filters(d: Dialect, source: str | None, actor: str | None,
             sessions: Collection[str] | None, since: str | None,
             params: list[Any]) -> str:
    where = ""
    if source is not None:
        where += f" AND {d.text('source', 's.data')} = {d.ph}"
        params.append(source)
    if actor is not None:
        where += f" AND {d.text('actor', 's.data')} = {d.ph}"
        params.append(actor)
    if sessions is not None:
        listed = sorted(sessions) or [""]
        where += f" AND s.session_id IN ({d.phs(len(listed))})"
        params.extend(listed)
    if since is not None:
        where += f" AND s.at >= {d.ph}"
        params.append(since)
    return where


async def list_turns(ledger: object, *, order: Order = "newest", after: Cursor | None = None,
                     source: str | None = None, actor: str | None = None,
                     sessions: Collection[str] | None = None, since: str | None = None,
                     limit: int = 50) -> list[TurnRow]:
    """At most ``limit`` turns in ``order`` after ``after`` (``None``: the first page),
    only ``source``'s, ``actor``'s, those of ``sessions`` (``None``: any) and those
    started at or after ``since``, when given.

    Raises:
        UsageError: an unknown order, or a limit under 1.
        LedgerError: the ledger could not be read.
    """
    if order not in ORDERS:
        raise UsageError(f"unknown order {order!r}: one of {', '.join(ORDERS)}")
    if limit < 1:
        raise UsageError(f"a page holds at least one turn, not {limit}")
    if any("\x00" in v for v in (source, actor, since) if v):
        return []
    reader = _reader(ledger)
    d = _dialect(ledger)
    if order == "errors":
        return await _errors(reader, d, after, source, actor, sessions, since, limit)
    params: list[Any] = []
    where = _filters(d, source, actor, sessions, since, params)
    if order in ("newest", "oldest"):
        if after is not None:
            where += f" AND s.seq {'<' if order == 'newest' else '>'} {d.ph}"
            params.append(after.seq)
        direction = "DESC" if order == "newest" else "ASC"
        statement = (f"SELECT {_COLUMNS} FROM audit_log s {_completed(d)} "
                     f"WHERE s.kind = 'turn.started'{where} ORDER BY s.seq {direction} "
                     f"LIMIT {d.ph}")
    else:
        value = turn_value(d, "cost_usd" if order == "cost" else "duration_ms", "c")
        if since is not None:  # still walked on the value's index, the time a filter
            where += f" AND c.at >= {d.ph}"
            params.append(since)
        if after is not None:
            where += f" AND ({value}, c.seq) < ({d.ph}, {d.ph})"
            params.extend([after.value, after.seq])
        statement = (f"SELECT {_COLUMNS} FROM audit_log c JOIN audit_log s ON "
                     f"s.turn_id = c.turn_id AND s.kind = 'turn.started' AND s.seq < c.seq "
                     f"WHERE c.kind = 'turn.completed'{where} "
                     f"ORDER BY {value} DESC, c.seq DESC LIMIT {d.ph}")
    params.append(int(limit))
    rows = [_row(r, order) for r in await reader.select(statement, params)]
    return await _counted(reader, d, rows)


async def _errors(reader: Any, d: Dialect, after: Cursor | None, source: str | None,
                  actor: str | None, sessions: Collection[str] | None, since: str | None,
                  limit: int) -> list[TurnRow]:
    """Turns with a failure, each at its newest failure, newest first (see module)."""
    rows: list[TurnRow] = []
    before = after.seq if after is not None else None
    async for seq, turn_id in newest_failures(reader, d, "turn_id", before, limit):
        params: list[Any] = []
        where = _filters(d, source, actor, sessions, since, params)
        picked = await reader.select(
            f"SELECT {_COLUMNS} FROM audit_log s {_completed(d)} WHERE s.turn_id = "
            f"{d.ph} AND s.kind = 'turn.started'{where} ORDER BY s.seq LIMIT 1",
            [turn_id, *params])
        if picked:
            rows.append(_keyed(_row(picked[0], "errors"), seq))
            if len(rows) == limit:
                break
    return await _counted(reader, d, rows)


async def _counted(reader: Any, d: Dialect, rows: list[TurnRow]) -> list[TurnRow]:
    """``rows`` with their failures counted (one read for the page, by the turns'
    index)."""
    if not rows:
        return rows
    listed = sorted({r.turn_id for r in rows})
    found = await reader.select(
        f"SELECT turn_id, count(*) FROM audit_log WHERE turn_id IN ({d.phs(len(listed))}) "
        f"AND ({failure_condition(d)}) GROUP BY turn_id", listed)
    counts = {t: int(n) for t, n in found}
    return [dataclasses.replace(r, failures=counts.get(r.turn_id, 0)) for r in rows]


def _keyed(row: TurnRow, seq: int) -> TurnRow:
    return dataclasses.replace(row, key=(0.0, seq))


def _row(r: Sequence[Any], order: Order) -> TurnRow:
    seq, turn_id, session_id, at, data, done_seq, done = r
    started = entry_data(data, int(seq))
    ended = entry_data(done, int(done_seq)) if done is not None else {}
    cost, duration = ended.get("cost_usd"), ended.get("duration_ms")
    value = (cost if order == "cost" else duration if order == "duration" else 0.0) or 0.0
    key_seq = int(done_seq) if order in ("cost", "duration") else int(seq)
    return TurnRow(int(seq), turn_id, session_id or None, at, str(started.get("source", "")),
                   str(started.get("actor", "")), str(started.get("model", "")),
                   ended.get("status"), ended.get("error_type"), cost, duration,
                   ended.get("input_tokens"), ended.get("output_tokens"),
                   ended.get("tool_calls"), started.get("message_digest"),
                   (float(value), key_seq))
