"""What ``overt ledger prune`` and ``disown-seal`` read before they act: the
``ledger.pruned`` entries no prune wrote, and the ledger's origin."""

from __future__ import annotations

from overt.ledger import checkpoints, retention, tree
from overt.ledger.reads.base import selecting
from overt.ledger.retention import Seal


async def forged_seals(ledger: object) -> list[Seal]:
    """The ``ledger.pruned`` entries that no prune wrote
    (:func:`overt.ledger.retention.forged_seals`).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    return await retention.forged_seals(reader.select, d)


async def origin(ledger: object) -> tuple[str, int]:
    """The ledger's origin (from entry 1, or the stored leaf standing in for it) and the
    seq it is pruned through.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
        LedgerIntegrityError: the stored tree does not match the chain.
    """
    reader, d = selecting(ledger)
    t = await tree.Tree.load(reader.select, d)
    await t.read(reader.select, 0, 1)
    return checkpoints.origin_of(t), t.floor
