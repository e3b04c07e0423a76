"""Retention: which prefix of the chain a prune may remove, the same on every backend.

A prune removes entries ``1..N`` (what is left of them) and their content,
where ``N`` is the last entry before the first one at or after the cutoff, and
before the first entry of any turn still waiting on something (an approval).
It is the one way rows leave the ledger, and it is recorded: the
``ledger.pruned`` entry seals the removed range (count, seqs, times, the hash
of entry ``N``), so ``verify`` still proves everything that remains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from overt.events import LedgerPruned
from overt.ledger import sql
from overt.ledger.sql import Dialect

QueryOne = Callable[[str, Sequence[Any]], Sequence[Any] | None]

DEFAULT_OLDER_THAN = "30d"


def plan(one: QueryOne, d: Dialect, cutoff: str, head_seq: int) -> LedgerPruned:
    """The prune record for removing what is older than ``cutoff``.

    ``one`` runs a query inside the caller's write transaction and returns its
    first row. ``removed_entries`` is 0 when nothing may be removed.
    """
    newer = one(sql.first_newer(d), (cutoff,))
    through = (int(newer[0]) - 1) if newer and newer[0] is not None else head_seq
    held_back: str | None = None
    waiting = one(sql.first_waiting(d), (through,))
    if waiting and waiting[0] is not None:
        through = int(waiting[0]) - 1
        turn = one(f"SELECT turn_id FROM audit_log WHERE seq = {d.ph}", (int(waiting[0]),))
        held_back = turn[0] if turn else None
    counted = one(sql.prune_range(d), (through,))
    removed = int(counted[0]) if counted else 0
    if removed == 0 or counted is None:
        return LedgerPruned(cutoff=cutoff, through_seq=through, first_removed_seq=None,
                            removed_entries=0, removed_content=0, last_removed_hash=None,
                            removed_from_at=None, removed_to_at=None,
                            held_back_by_turn=held_back)
    last_hash = one(sql.hash_at(d), (int(counted[2]),))
    content = one(sql.count_content_through(d), (through,))
    return LedgerPruned(
        cutoff=cutoff, through_seq=int(counted[2]), first_removed_seq=int(counted[1]),
        removed_entries=removed, removed_content=int(content[0]) if content else 0,
        last_removed_hash=last_hash[0] if last_hash else None,
        removed_from_at=counted[3], removed_to_at=counted[4], held_back_by_turn=held_back)
