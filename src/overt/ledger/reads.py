"""Typed reads of the chain for packages outside the ledger's.

A package that needs more of the record than the :class:`~overt.ledger.base.Ledger`
protocol offers asks one of these functions: each query is written here once, over
the dialect of the ledger's backend, and answers typed values. No caller writes
SQL or tells the backends apart itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from overt.errors import UsageError
from overt.ledger.base import Entry
from overt.ledger.chain import ENTRY_COLUMNS, row_to_entry
from overt.ledger.sql import POSTGRES, SQLITE, Dialect, chunks, failure_condition, of_kinds


@runtime_checkable
class Selecting(Protocol):
    """A ledger these reads can query: its backend's name and plain reads (both
    built-in ledgers are)."""

    backend: str

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...


def selecting(ledger: object) -> tuple[Selecting, Dialect]:
    """``ledger`` as one these reads can query, and its dialect.

    Raises:
        UsageError: ``ledger`` is not a SQLite or PostgreSQL ledger.
    """
    if not isinstance(ledger, Selecting) or ledger.backend not in ("sqlite", "postgres"):
        raise UsageError(f"{type(ledger).__name__} offers no reads of its tables (the "
                         "SQLite and PostgreSQL ledgers do)")
    return ledger, SQLITE if ledger.backend == "sqlite" else POSTGRES


async def count_in_sessions(ledger: object, kind: str, session_ids: Sequence[str], *,
                            since: str | None = None) -> int:
    """Entries of ``kind`` at or after ``since`` in any of ``session_ids``.

    Raises:
        UsageError: see :func:`selecting`.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    total = 0
    for ids in chunks(sorted(session_ids)):
        rows = await reader.select(
            f"SELECT count(*) FROM audit_log WHERE {of_kinds(d, [kind])} "
            f"AND at >= {d.ph} AND session_id IN ({d.phs(len(ids))})",
            (kind, since or "", *ids))
        total += int(rows[0][0])
    return total


async def newest_failure_in(ledger: object, session_ids: Sequence[str]) -> Entry | None:
    """The newest entry recording a failure (as :meth:`Ledger.last_error` reads
    them) in any of ``session_ids`` or outside any session.

    Raises:
        UsageError: see :func:`selecting`.
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
