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
from dataclasses import dataclass
from typing import Any

from overt.events import LedgerPruned
from overt.ledger import request_parts, sql
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


@dataclass(frozen=True, slots=True)
class Seal:
    """A ``ledger.pruned`` entry that no prune wrote (see :func:`forged_seals`)."""

    seq: int
    hash: str
    first: int
    through: int
    why: str

    def text(self) -> str:
        return (f"entry {self.seq} is a ledger.pruned entry that no prune wrote: it seals "
                f"entries {self.first}..{self.through}, but {self.why}")


def seals_query(d: Dialect) -> str:
    return (f"SELECT seq, hash, {d.text('first_removed_seq')}, {d.text('through_seq')}, "
            f"{d.text('removed_entries')} FROM audit_log WHERE kind = 'ledger.pruned' "
            f"AND {sql.KIND_INDEXED} ORDER BY seq")


def judge(rows: Sequence[Sequence[Any]], first_present: int) -> list[Seal]:
    """The ``ledger.pruned`` entries among ``rows`` (seq, hash, first removed, through,
    removed count; in seq order) that no prune wrote, in a ledger whose first entry
    is ``first_present``.

    A prune deletes ``first..through`` and appends its entry in one transaction, and
    each prune starts where the one before it stopped; so an entry written by one
    comes after what it seals, nothing it seals is left, and its range follows the
    last such entry's (the first starts at 1). Any other is a forgery: one
    ``INSERT`` of a chained entry, which the chain alone cannot tell from a prune's.
    """
    found: list[Seal] = []
    expected = 1
    for seq, digest, first, through, removed in rows:
        if first is None or through is None or not removed or int(removed) <= 0:
            continue  # a prune that removed nothing
        seq, first, through = int(seq), int(first), int(through)
        if seq <= through:
            why = "it comes before the entries it says were removed"
        elif first_present <= through:
            why = (f"entries {max(first, first_present)}..{through} are still in the ledger "
                   "(nothing of what it seals was removed with it)")
        elif first != expected:
            why = (f"the prune before it removed through entry {expected - 1}, so the next "
                   f"one starts at {expected}")
        else:
            expected = through + 1
            continue
        found.append(Seal(seq, str(digest), first, through, why))
    return found


async def forged_seals(select: Callable[[str, Sequence[Any]], Any], d: Dialect) -> list[Seal]:
    """The ``ledger.pruned`` entries in the ledger that no prune wrote (:func:`judge`)."""
    bounds = await select("SELECT min(seq) FROM audit_log", ())
    first = int(bounds[0][0]) if bounds and bounds[0][0] is not None else 1
    return judge(await select(seals_query(d), ()), first)


SHARED_BODY_FIELDS = ("policy_digest",)
"""Entry fields naming a body stored once and named again by later entries (the rules
in force are stored with a process's first decision, then only named): a prune
carries such a body forward to the first entry it keeps that names it."""


def carry_bodies(conn: Any, d: Dialect, through: int, stream: request_parts.Stream,
                 found: request_parts.Carry | None = None) -> int:
    """Store again, at the first entry after ``through`` that names it, each body that
    entries a prune through ``through`` keeps name in one of
    :data:`SHARED_BODY_FIELDS` and that is stored only at or before ``through``;
    inside the prune's transaction, before the content is deleted; and the parts the
    requests of kept inferences name (:func:`overt.ledger.request_parts.carry_parts`;
    ``stream``: the backend's, on ``conn``; ``found``: what a search before the write
    lock found of them). How many."""
    carried = 0
    for field in SHARED_BODY_FIELDS:
        named = conn.execute(
            f"SELECT {d.text(field)}, min(seq) FROM audit_log WHERE seq > {d.ph} "
            f"AND kind = 'policy.decision' AND {d.text(field)} IS NOT NULL "
            f"GROUP BY {d.text(field)}", (through,)).fetchall()
        for digest, seq in named:
            rows = conn.execute(
                f"SELECT seq, body, created_at FROM content_blobs WHERE digest = {d.ph} "
                f"ORDER BY seq", (digest,)).fetchall()
            if not rows or any(int(r[0]) > through for r in rows):
                continue  # never stored (verify says so), or kept anyway
            _, body, created_at = rows[-1]
            store_again(conn, d, int(seq), digest, body, created_at)
            carried += 1
    return carried + request_parts.carry_parts(conn, d, through, store_again, stream, found)


def store_again(conn: Any, d: Dialect, seq: int, digest: str, body: Any, created_at: Any) -> None:
    """Keep ``body`` once more, with entry ``seq`` (a prune carrying it forward)."""
    if d.name == "sqlite":
        low = seq << sql.CONTENT_KEY_SHIFT
        top = conn.execute("SELECT max(key) FROM content_blobs WHERE key BETWEEN ? AND ?",
                           (low, low + sql.CONTENT_KEY_MASK)).fetchone()
        key = low if top is None or top[0] is None else int(top[0]) + 1
        conn.execute(sql.insert_content(d), (key, seq, digest, body, created_at))
    else:
        conn.execute("INSERT INTO content_blobs (seq, digest, body, created_at) "
                     "VALUES (%s, %s, %s, %s)", (seq, digest, body, created_at))


def search_carry(conn: Any, d: Dialect, cutoff: str,
                 stream: request_parts.Stream) -> request_parts.Carry | None:
    """In a read snapshot on ``conn``, before a prune holds the write lock: the parts its
    kept requests name that it must store again, as the snapshot holds them
    (:func:`overt.ledger.request_parts.search_carry`); ``None`` when it would remove
    nothing."""
    head = request_parts.head_seq(conn)
    record = plan(lambda q, p: conn.execute(q, p).fetchone(), d, cutoff, head)
    if not record.removed_entries:
        return None
    through = record.through_seq
    return request_parts.search_carry(
        through, head, ((seq, digest) for seq, digest, _
                        in request_parts.requests(conn, d, through)),
        stream(request_parts.newest_first(d)))
