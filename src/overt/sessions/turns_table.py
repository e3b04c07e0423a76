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
  ``audit_log_turn_duration``); ``since`` filters the walk.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from overt.errors import UsageError
from overt.ledger.reads import turns
from overt.ledger.reads.failures import failure_counts, newest_failures
from overt.ledger.reads.turns import TurnRecord

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
    if order == "errors":
        return await _errors(ledger, after, source, actor, sessions, since, limit)
    found = await turns.turn_records(
        ledger, order=order, after=(after.value, after.seq) if after is not None else None,
        source=source, actor=actor, sessions=sessions, since=since, limit=limit)
    return await _counted(ledger, [_row(r, order) for r in found])


async def _errors(ledger: object, after: Cursor | None, source: str | None,
                  actor: str | None, sessions: Collection[str] | None, since: str | None,
                  limit: int) -> list[TurnRow]:
    """Turns with a failure, each at its newest failure, newest first (see module)."""
    rows: list[TurnRow] = []
    before = after.seq if after is not None else None
    async for seq, turn_id in newest_failures(ledger, "turn_id", before, limit):
        picked = await turns.turn_record(ledger, turn_id, source=source, actor=actor,
                                         sessions=sessions, since=since)
        if picked is not None:
            rows.append(_keyed(_row(picked, "errors"), seq))
            if len(rows) == limit:
                break
    return await _counted(ledger, rows)


async def _counted(ledger: object, rows: list[TurnRow]) -> list[TurnRow]:
    """``rows`` with their failures counted (one read for the page, by the turns'
    index)."""
    if not rows:
        return rows
    counts = await failure_counts(ledger, "turn_id", [r.turn_id for r in rows])
    return [dataclasses.replace(r, failures=counts.get(r.turn_id, 0)) for r in rows]


def _keyed(row: TurnRow, seq: int) -> TurnRow:
    return dataclasses.replace(row, key=(0.0, seq))


def _row(r: TurnRecord, order: Order) -> TurnRow:
    value = (r.cost_usd if order == "cost" else r.duration_ms if order == "duration"
             else 0.0) or 0.0
    key_seq = r.done_seq if order in ("cost", "duration") and r.done_seq is not None else r.seq
    return TurnRow(r.seq, r.turn_id, r.session_id, r.started_at, r.source, r.actor, r.model,
                   r.status, r.error_type, r.cost_usd, r.duration_ms, r.input_tokens,
                   r.output_tokens, r.tool_calls, r.message_digest, (float(value), key_seq))
