"""What the cockpit reads of the chain beyond the :class:`~overt.ledger.base.Ledger`
protocol: its size, the entries appended past one (the Live page's feed), one entry
by number (its permalink), and the newest entry of a kind (the newest checkpoint)."""

from __future__ import annotations

from typing import NamedTuple

from overt.ledger.base import Entry
from overt.ledger.chain import ENTRY_COLUMNS, row_to_entry
from overt.ledger.reads.base import selecting
from overt.ledger.sql import of_kinds


class Size(NamedTuple):
    """How many entries the chain holds, and the seq of its newest (0: none); the two
    differ once a prune removed the oldest."""

    entries: int
    head: int


async def size(ledger: object) -> Size:
    """The chain's size.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, _ = selecting(ledger)
    rows = await reader.select("SELECT count(*), max(seq) FROM audit_log")
    return Size(int(rows[0][0] or 0), int(rows[0][1] or 0))


async def head(ledger: object) -> int:
    """The seq of the newest entry (0: none).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, _ = selecting(ledger)
    rows = await reader.select("SELECT max(seq) FROM audit_log", ())
    return int(rows[0][0] or 0) if rows else 0


async def entries_after(ledger: object, seq: int, limit: int) -> list[Entry]:
    """The entries appended past ``seq``, oldest first (at most ``limit``).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE seq > "
                               f"{d.ph} ORDER BY seq LIMIT {int(limit)}", (seq,))
    return [row_to_entry(r) for r in rows]


async def entry_at(ledger: object, seq: int) -> Entry | None:
    """Entry ``seq``, or ``None`` when there is none (pruned, or never written).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE seq = {d.ph}",
                               (seq,))
    return row_to_entry(rows[0]) if rows else None


async def newest_of_kind(ledger: object, kind: str) -> Entry | None:
    """The newest entry of ``kind`` (through the index of entries by kind), or
    ``None`` when the chain holds none.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE "
                               f"{of_kinds(d, [kind])} ORDER BY seq DESC LIMIT 1", (kind,))
    return row_to_entry(rows[0]) if rows else None
