"""What replay reads of the record in bulk: the entries of the turns it replays, and
the bodies stored with a range of entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from overt.ledger.base import Entry
from overt.ledger.chain import ENTRY_COLUMNS, row_to_entry
from overt.ledger.reads.base import selecting
from overt.ledger.reads.conversations import Body


class StoredBody(NamedTuple):
    """A body of the content tier as stored (not yet checked against its digest)."""

    digest: str
    body: Body


async def bodies_between(ledger: object, first_seq: int, last_seq: int) -> list[StoredBody]:
    """The bodies stored with entries ``first_seq`` to ``last_seq`` (SQLite: the range
    of their keys; PostgreSQL: of their seqs).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    if d.name == "sqlite":  # the rowid range of seq first_seq .. last_seq
        statement = ("SELECT digest, body FROM content_blobs WHERE key >= "
                     f"({d.ph} << 20) AND key < (({d.ph} + 1) << 20)")
    else:
        statement = (f"SELECT digest, body FROM content_blobs WHERE seq >= {d.ph} "
                     f"AND seq <= {d.ph}")
    return [StoredBody(digest, body)
            for digest, body in await reader.select(statement, (first_seq, last_seq))]


async def turns_entries(ledger: object, turn_ids: Sequence[str]) -> dict[str, list[Entry]]:
    """The entries of each of ``turn_ids``, in order: one read for them all, through
    the turn index.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    out: dict[str, list[Entry]] = {t: [] for t in turn_ids}
    rows = await reader.select(
        f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE turn_id IN ({d.phs(len(turn_ids))}) "
        "ORDER BY seq", tuple(turn_ids))
    for row in rows:
        entry = row_to_entry(row)
        out[entry.turn_id or ""].append(entry)
    return out
