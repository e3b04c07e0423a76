"""The ledger's Merkle tree, kept in the ``merkle_nodes`` table so that proving one
turn reads a few hundred rows, not the ledger (see :mod:`.merkle` for the hashing).

What is stored
    ``merkle_nodes (level, first_leaf, hash)``: the hash (hex) of the complete
    subtree over leaves ``[first_leaf, first_leaf + 2**level)`` (leaf ``i`` is
    entry ``seq = i + 1``).
    Three kinds of row, all written lazily, never on a turn's append path:

    - *tiles*: every complete, aligned subtree of :data:`TILE` (256) leaves,
      written when a checkpoint is made (:func:`fill`), for old ledgers too;
    - leaf 0 (level 0, start 0): the ledger's identity survives a prune;
    - at a prune through ``seq = t``: the complete subtrees that make up
      ``[0, t)`` (at most one per level), in the prune's own transaction
      (:func:`prune_rows`).

    The table is append-only (triggers) and never pruned; rows are never
    updated, and a row written twice holds the same hash.

A pruned prefix
    The tree always starts at entry 1: checkpoints keep counting the tree from
    the start, and the stored subtrees stand in for the leaves a prune removed,
    so every root and every proof of an entry that is still there can be
    computed after a prune. A proof for a pruned entry is refused
    (:class:`NotFoundError`). A ledger pruned before overt kept the tree (migration
    12) has no nodes for its removed prefix: no checkpoint can be made for it.

Everything is read through ``select(statement, params) -> rows`` (the ledger's
own, or a connection's inside a transaction), with the dialect's placeholder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from overt.errors import LedgerIntegrityError, NotFoundError
from overt.ledger import merkle
from overt.ledger.sql import Dialect

TILE_LEVEL = 8
TILE = 1 << TILE_LEVEL
BATCH = 1 << 16
"""Leaves read in one query while filling the tiles of an old ledger."""

Rows = list[Any]
SyncSelect = Callable[[str, Sequence[Any]], Rows]
AsyncSelect = Callable[[str, Sequence[Any]], Awaitable[Rows]]
NodeRow = tuple[str, dict[str, Any]]
"""A row for :meth:`overt.ledger.base.Ledger.record`'s ``rows``."""


def node_row(level: int, start: int, digest: bytes) -> NodeRow:
    return ("merkle_nodes", {"level": level, "first_leaf": start, "hash": digest.hex()})


def head_size(rows: Rows) -> int:
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


class Tree:
    """The tree as far as ``size`` leaves, over stored nodes and the leaves still in
    the chain. Build with :meth:`load` (async) or :meth:`load_sync`; ask for
    ``perfect`` subtrees, roots and proofs; :attr:`new_nodes` are those computed
    here that are worth storing (tiles, leaf 0)."""

    def __init__(self, d: Dialect, size: int, nodes: Iterable[Sequence[Any]]) -> None:
        self.d = d
        self.size = size
        self.stored: dict[tuple[int, int], bytes] = {}
        for level, start, digest in nodes:
            key = (int(level), int(start))
            try:
                value = bytes.fromhex(digest)
            except (TypeError, ValueError) as exc:
                raise LedgerIntegrityError(f"the stored Merkle tree's subtree of 2**{key[0]} "
                                           f"leaves at {key[1]} is not a hash") from exc
            if self.stored.setdefault(key, value) != value:
                raise LedgerIntegrityError(f"the stored Merkle tree holds two hashes for the "
                                           f"subtree of 2**{key[0]} leaves at {key[1]}")
        self.leaves: dict[int, bytes] = {}
        self.computed: dict[tuple[int, int], bytes] = {}
        self.new_nodes: list[NodeRow] = []

    # -- reading --------------------------------------------------------------

    @staticmethod
    def nodes_query(d: Dialect) -> str:
        return "SELECT level, first_leaf, hash FROM merkle_nodes ORDER BY level, first_leaf"

    @staticmethod
    def leaves_query(d: Dialect) -> str:
        return (f"SELECT seq, hash FROM audit_log WHERE seq > {d.ph} AND seq <= {d.ph} "
                "ORDER BY seq")

    @classmethod
    async def load(cls, select: AsyncSelect, d: Dialect, size: int | None = None) -> Tree:
        """The tree of ``size`` leaves (default: every entry there is)."""
        if size is None:
            size = head_size(await select("SELECT max(seq) FROM audit_log", ()))
        return cls(d, size, await select(cls.nodes_query(d), ()))

    @classmethod
    def load_sync(cls, select: SyncSelect, d: Dialect, size: int) -> Tree:
        return cls(d, size, select(cls.nodes_query(d), ()))

    def needs(self, lo: int, hi: int) -> bool:
        """Whether leaves ``[lo, hi)`` must be read to answer for them (no stored
        subtree holds them)."""
        return any(self._cover(i) is None for i in range(lo, hi, TILE))

    def _cover(self, leaf: int) -> tuple[int, int] | None:
        for level in range(63, TILE_LEVEL - 1, -1):
            start = leaf >> level << level
            if (level, start) in self.stored:
                return level, start
        return None

    def add_leaves(self, rows: Iterable[Sequence[Any]]) -> None:
        """Leaves read from the chain: (seq, chain hash) rows."""
        for seq, digest in rows:
            self.leaves[int(seq) - 1] = merkle.entry_leaf(digest)

    async def read(self, select: AsyncSelect, lo: int, hi: int) -> None:
        """Read leaves ``[lo, hi)`` from the chain (as many as are still there)."""
        for start in range(lo, hi, BATCH):
            self.add_leaves(await select(self.leaves_query(self.d),
                                         (start, min(start + BATCH, hi))))

    def read_sync(self, select: SyncSelect, lo: int, hi: int) -> None:
        for start in range(lo, hi, BATCH):
            self.add_leaves(select(self.leaves_query(self.d), (start, min(start + BATCH, hi))))

    # -- the tree -------------------------------------------------------------

    def perfect(self, lo: int, size: int) -> bytes:
        """The hash of the complete subtree ``[lo, lo + size)``.

        Raises:
            NotFoundError: a leaf it needs was pruned (or not read) and nothing stored
                stands in for it.
        """
        level = size.bit_length() - 1
        key = (level, lo)
        found = self.stored.get(key) or self.computed.get(key)
        if found is not None:
            return found
        if size == 1:
            leaf = self.leaves.get(lo)
            if leaf is None:
                raise NotFoundError(f"entry {lo + 1} is not in the ledger (pruned, or never "
                                 "there) and no stored subtree stands in for it")
            return leaf
        half = size >> 1
        found = merkle.node_hash(self.perfect(lo, half), self.perfect(lo + half, half))
        self.computed[key] = found
        if level == TILE_LEVEL:
            self.new_nodes.append(node_row(level, lo, found))
        return found

    def root(self, size: int | None = None) -> bytes:
        return merkle.root(self.perfect, self.size if size is None else size)

    def inclusion(self, index: int, size: int | None = None) -> list[bytes]:
        """The inclusion proof of leaf ``index``.

        Raises:
            NotFoundError: the leaf was pruned.
        """
        n = self.size if size is None else size
        if index not in self.leaves:
            raise NotFoundError(f"entry {index + 1} is not in the ledger: no proof for it")
        return merkle.inclusion_proof(self.perfect, index, n)

    def consistency(self, old: int, new: int | None = None) -> list[bytes]:
        return merkle.consistency_proof(self.perfect, old, self.size if new is None else new)

    def tiles(self) -> None:
        """Compute every complete tile up to :attr:`size` not stored yet (and leaf 0),
        adding them to :attr:`new_nodes`; the leaves must have been read."""
        if self.size and (0, 0) not in self.stored:
            self.stored[(0, 0)] = leaf0 = self.perfect(0, 1)
            self.new_nodes.append(node_row(0, 0, leaf0))
        for lo in range(0, self.size - self.size % TILE, TILE):
            if (TILE_LEVEL, lo) in self.stored or (TILE_LEVEL, lo) in self.computed:
                continue
            cover = self._cover(lo)
            if cover is not None and cover[0] > TILE_LEVEL:
                continue  # a larger stored subtree (a prune's) already holds it
            leaves = [self.leaves.get(i) for i in range(lo, lo + TILE)]
            if None in leaves:  # some went with a prune: its stored subtrees stand in
                self.perfect(lo, TILE)
                continue
            digest = _tile(leaves)  # type: ignore[arg-type]
            self.computed[(TILE_LEVEL, lo)] = digest
            self.new_nodes.append(node_row(TILE_LEVEL, lo, digest))

    def proof_leaves(self, indexes: Iterable[int]) -> list[tuple[int, int]]:
        """The leaf ranges an inclusion proof of ``indexes`` reads: each one's tile
        (or the partial tile at the end); stored tiles cover the rest."""
        ranges = {(i - i % TILE, min(i - i % TILE + TILE, self.size)) for i in indexes}
        tail = self.size - self.size % TILE
        if tail < self.size:
            ranges.add((tail, self.size))
        for lo in range(0, tail, TILE):  # a complete tile no checkpoint stored yet
            if (TILE_LEVEL, lo) not in self.stored and self._cover(lo) is None:
                ranges.add((lo, lo + TILE))
        return sorted(ranges)


async def open_tree(select: AsyncSelect, d: Dialect, size: int | None = None, *,
                    leaves: Iterable[int] = ()) -> Tree:
    """The tree of ``size`` leaves with what proving ``leaves`` (and its root) needs read."""
    tree = await Tree.load(select, d, size)
    for lo, hi in _merged(tree.proof_leaves(leaves)):
        await tree.read(select, lo, hi)
    return tree


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


async def fill(select: AsyncSelect, d: Dialect, size: int | None = None) -> Tree:
    """The tree of ``size`` leaves (default: the whole ledger) with every tile not
    stored yet computed, ready to store (:attr:`Tree.new_nodes`), and the leaves
    after the last tile read (its root needs them)."""
    tree = await Tree.load(select, d, size)
    tail = tree.size - tree.size % TILE
    for lo in range(0, tail, BATCH):
        hi = min(lo + BATCH, tail)
        if tree.needs(lo, hi):
            await tree.read(select, lo, hi)
    await tree.read(select, tail, tree.size)
    tree.tiles()
    return tree


def _tile(leaves: list[bytes]) -> bytes:
    """The hash of a complete tile from its leaf hashes, level by level."""
    sha256 = hashlib.sha256
    level = leaves
    while len(level) > 1:
        level = [sha256(b"\x01" + level[i] + level[i + 1]).digest()
                 for i in range(0, len(level), 2)]
    return level[0]


def prune_rows(select: SyncSelect, d: Dialect, through: int) -> list[NodeRow]:
    """Inside a prune's transaction, before it deletes through ``seq = through``: the
    nodes that stand in for leaves ``[0, through)`` once they are gone (tiles not
    stored yet, leaf 0, and the complete subtrees making up the range).

    A ledger whose prefix was pruned before the tree was kept gets none: its tree
    cannot be built (see the module docstring)."""
    tree = Tree.load_sync(select, d, through)
    first = select("SELECT min(seq) FROM audit_log", ())
    if first and first[0][0] is not None and int(first[0][0]) > 1 \
            and (0, 0) not in tree.stored:
        return []
    tail = through - through % TILE
    for lo in range(0, through, BATCH):
        hi = min(lo + BATCH, through)
        if lo >= tail or tree.needs(lo, hi):
            tree.read_sync(select, lo, hi)
    tree.tiles()
    rows = list(tree.new_nodes)
    for lo, n in merkle.decomposition(0, through):
        level = n.bit_length() - 1
        if (level, lo) not in tree.stored and level != TILE_LEVEL:
            rows.append(node_row(level, lo, tree.perfect(lo, n)))
    return rows


def store_prune_rows(conn: Any, d: Dialect, through: int) -> None:
    """:func:`prune_rows` inserted on ``conn`` (either backend's connection, inside the
    prune's transaction, before it deletes). A plain ``INSERT``: a prune runs as the
    ledger's owner, and on PostgreSQL only the owner may write these (the writer's
    tiles go through ``overt_write_merkle_nodes``, which recomputes them, see
    :mod:`overt.ledger.schema.derived`)."""
    insert = f"INSERT INTO merkle_nodes (level, first_leaf, hash) VALUES ({d.phs(3)})"
    for _, values in prune_rows(lambda q, p: conn.execute(q, p).fetchall(), d, through):
        conn.execute(insert, (values["level"], values["first_leaf"], values["hash"]))
