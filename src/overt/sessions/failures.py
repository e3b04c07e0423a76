"""Sessions or turns by their newest failure, newest first: the scan both tables'
errors-first order reads (:mod:`overt.sessions.sessions_table`,
:mod:`overt.sessions.turns_table`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

from overt.ledger.sql import Dialect, failure_condition


async def newest_failures(reader: Any, d: Dialect, column: Literal["session_id", "turn_id"],
                          before: int | None, limit: int) -> AsyncIterator[tuple[int, str]]:
    """Each ``column`` value (a session or a turn) with a failing entry older than
    ``before``, as (the seq of its newest failing entry, the value), newest first.

    Failing entries are read in batches of at least ``4 * limit``; a value is yielded
    where its newest failure comes, so a caller that stops after ``limit`` rows reads
    only as far back as that."""
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
