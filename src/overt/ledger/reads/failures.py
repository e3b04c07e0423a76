"""Entries that record a failure (as :meth:`Ledger.last_error` reads them: a turn that
did not complete, a tool call not ``ok``, a model error, a plugin's error), found
through the failures' partial index (``audit_log_failures``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from overt.ledger.base import Entry
from overt.ledger.chain import ENTRY_COLUMNS, row_to_entry
from overt.ledger.reads.base import selecting
from overt.ledger.sql import chunks, failure_condition

Column = Literal["session_id", "turn_id"]
"""What failures are grouped by: their session or their turn."""


async def newest_failure_in(ledger: object, session_ids: Sequence[str]) -> Entry | None:
    """The newest entry recording a failure in any of ``session_ids`` or outside any
    session.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables (see
            :func:`~overt.ledger.reads.base.selecting`).
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    head = f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE ({failure_condition(d)}) AND "
    found = await reader.select(head + "session_id IS NULL ORDER BY seq DESC LIMIT 1")
    for ids in chunks(sorted(session_ids)):
        found += await reader.select(
            head + f"session_id IN ({d.phs(len(ids))}) ORDER BY seq DESC LIMIT 1", ids)
    entries = [row_to_entry(row) for row in found]
    return max(entries, key=lambda e: e.seq, default=None)


async def newest_failures(ledger: object, column: Column, before: int | None,
                          limit: int) -> AsyncIterator[tuple[int, str]]:
    """Each ``column`` value (a session or a turn) with a failing entry older than
    entry ``before`` (``None``: any), as (the seq of its newest failing entry, the
    value), newest first: the scan both tables' errors-first order reads.

    Failing entries are read in batches of at least ``4 * limit``; a value is yielded
    where its newest failure comes, so a caller that stops after ``limit`` rows reads
    only as far back as that.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    failing = failure_condition(d)
    batch = max(limit * 4, 64)
    cursor = before
    while True:
        params: list[Any] = []
        where = f"({failing}) AND {column} IS NOT NULL"
        if cursor is not None:
            where += f" AND seq < {d.ph}"
            params.append(cursor)
        found = await reader.select(
            f"SELECT seq, {column} FROM audit_log WHERE {where} ORDER BY seq DESC "
            f"LIMIT {d.ph}", [*params, batch])
        if not found:
            return
        cursor = int(found[-1][0])
        listed = sorted({key for _, key in found})
        newest = {key: int(seq) for key, seq in await reader.select(
            f"SELECT {column}, max(seq) FROM audit_log WHERE {column} IN "
            f"({d.phs(len(listed))}) AND ({failing}) GROUP BY {column}", listed)}
        for seq, key in found:
            if newest.get(key) == int(seq):
                yield int(seq), key
        if len(found) < batch:
            return


async def failure_counts(ledger: object, column: Column,
                         keys: Sequence[str]) -> dict[str, int]:
    """How many entries recording a failure each of ``keys`` (sessions or turns, by
    ``column``) holds; a key without any is left out. One read, through the index of
    ``column``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    if not keys:
        return {}
    reader, d = selecting(ledger)
    listed = sorted(set(keys))
    found = await reader.select(
        f"SELECT {column}, count(*) FROM audit_log WHERE {column} IN ({d.phs(len(listed))}) "
        f"AND ({failure_condition(d)}) GROUP BY {column}", listed)
    return {key: int(n) for key, n in found}
