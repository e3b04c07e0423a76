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
    updated. It is derived data, and whoever can write the database can add a row
    (a second hash for a subtree, or a wrong one for a subtree not stored yet).

What is trusted
    Nothing stored, where the leaves are still there, unless a signature vouches
    for it. A prune's stand-ins (:func:`prune_rows`), ``verify --checkpoints``
    (:mod:`.audit`) and a checkpoint with no signed one before it (:func:`fill`)
    compute every subtree that holds an entry still in the chain from the entries'
    chain hashes; a stored row for it is only compared, and one that differs (or a
    subtree stored with two hashes) is named, ``(level, first leaf)``, and never
    used. A routine checkpoint (:func:`extend`) takes the stored tiles under the
    previous signed checkpoint only once they, with the leaves after them, give
    the root that checkpoint signed: a wrong or missing tile there gives another
    root (a second preimage of SHA-256 aside), and the tree is then recomputed from
    every leaf as :func:`fill` does. Making a proof (:func:`open_tree`)
    uses the stored tiles as a cache, but only where the root they give is the
    signed one; else it recomputes from the entries.

    Where the leaves are gone (a pruned prefix), the subtrees that stand in for
    them cannot be recomputed. They are trusted because of how they came to be:
    the prune computes them from the leaves, in its own transaction, refusing
    to run if a row already stored for one of them disagrees (:func:`prune_rows`),
    and ``overt ledger prune`` signs a checkpoint right after, whose root is built
    from them and from the entries after them. Every later root is built from the
    same stand-ins (a second row for one makes it unusable, not different), so a
    stand-in changed afterwards makes every later root differ from the signed ones:
    ``verify --checkpoints`` fails. A stored row for a subtree wholly inside the
    pruned prefix that is not one of the stand-ins is never asked for.

A pruned prefix
    The tree always starts at entry 1: checkpoints keep counting the tree from
    the start, and the stored subtrees stand in for the leaves a prune removed,
    so every root and every proof of an entry that is still there can be
    computed after a prune. A proof for a pruned entry is refused
    (:class:`NotFoundError`). A ledger whose removed prefix has no stored subtrees
    (every prune stores them in its own transaction: only a forged prune leaves
    none) cannot have its tree built: no checkpoint can be made for it.

Everything is read through ``select(statement, params) -> rows`` (the ledger's
own, or a connection's inside a transaction), with the dialect's placeholder.
"""

from __future__ import annotations

import asyncio
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

BOUNDS = "SELECT (SELECT min(seq) FROM audit_log), (SELECT max(seq) FROM audit_log)"
"""The first and last seq (two subqueries: SQLite reads ``min`` and ``max`` together
by scanning the table, each alone from the index)."""

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
    """The tree as far as ``size`` leaves, over the leaves still in the chain and, for
    the pruned prefix, the stored subtrees that stand in for it. Build with
    :meth:`load` (async) or :meth:`load_sync`; ask for ``perfect`` subtrees, roots
    and proofs; :attr:`new_nodes` are those computed here that are worth storing
    (tiles, leaf 0).

    Two ways to use the stored nodes:

    - *recomputed* (``cached=False``, what signing and ``verify --checkpoints``
      use): every subtree that holds a leaf still in the chain is computed from the
      leaves (all of them must have been read); a stored row for it is only
      compared, and one that differs is listed in :attr:`bad` (never used). Only a
      subtree wholly inside the pruned prefix is taken from storage: nothing else
      can stand in for leaves that are gone, and the signed checkpoint made at
      prune time covers it (see the module docstring).
    - *cached* (``cached=True``, what making a proof uses): stored tiles stand in
      for leaves not read, except around the leaves read for the proof, which are
      computed; the caller checks the root against a signed one before trusting
      anything (:func:`open_tree`'s callers fall back to :func:`fill` when it
      differs).
    """

    def __init__(self, d: Dialect, size: int, nodes: Iterable[Sequence[Any]], *,
                 floor: int = 0, cached: bool = False, vouched: int = 0) -> None:
        self.d = d
        self.size = size
        self.floor = floor
        """Leaves below this index were pruned: only stored subtrees stand in for them."""
        self.cached = cached
        self.vouched = vouched - vouched % TILE
        """Stored tiles wholly below this leaf are taken as they are (:func:`extend`
        checks them against a signed root before the tree is used)."""
        self.stored: dict[tuple[int, int], bytes] = {}
        self.ambiguous: dict[tuple[int, int], set[bytes]] = {}
        """Subtrees stored with more than one hash (one of them planted): never used."""
        for level, start, digest in nodes:
            key = (int(level), int(start))
            try:
                value = bytes.fromhex(digest)
                if len(value) != 32:
                    raise ValueError("not 32 bytes")
            except (TypeError, ValueError):
                self.ambiguous.setdefault(key, set()).add(b"")
                continue
            if key in self.ambiguous:
                self.ambiguous[key].add(value)
            elif self.stored.setdefault(key, value) != value:
                self.ambiguous[key] = {self.stored.pop(key), value}
        for key in self.ambiguous:
            self.stored.pop(key, None)
        self.leaves: dict[int, bytes] = {}
        self.computed: dict[tuple[int, int], bytes] = {}
        self.new_nodes: list[NodeRow] = []
        self.bad: list[tuple[int, int]] = []
        """Stored subtrees (level, first leaf) that are not the hash of their leaves."""

    # -- reading --------------------------------------------------------------

    @staticmethod
    def nodes_query(d: Dialect) -> str:
        return "SELECT level, first_leaf, hash FROM merkle_nodes ORDER BY level, first_leaf"

    @staticmethod
    def leaves_query(d: Dialect) -> str:
        return (f"SELECT seq, hash FROM audit_log WHERE seq > {d.ph} AND seq <= {d.ph} "
                "ORDER BY seq")

    @classmethod
    async def load(cls, select: AsyncSelect, d: Dialect, size: int | None = None, *,
                   cached: bool = False, vouched: int = 0) -> Tree:
        """The tree of ``size`` leaves (default: every entry there is)."""
        rows = await select(BOUNDS, ())
        first, head = _bounds(rows)
        return cls(d, head if size is None else size, await select(cls.nodes_query(d), ()),
                   floor=first - 1 if first else 0, cached=cached, vouched=vouched)

    @classmethod
    def load_sync(cls, select: SyncSelect, d: Dialect, size: int) -> Tree:
        first, _ = _bounds(select(BOUNDS, ()))
        return cls(d, size, select(cls.nodes_query(d), ()), floor=first - 1 if first else 0)

    def add_leaves(self, rows: Iterable[Sequence[Any]]) -> None:
        """Leaves read from the chain: (seq, chain hash) rows."""
        for seq, digest in rows:
            self.leaves[int(seq) - 1] = merkle.entry_leaf(digest)

    async def read(self, select: AsyncSelect, lo: int, hi: int) -> None:
        """Read leaves ``[lo, hi)`` from the chain (as many as are still there)."""
        for start in range(max(lo, self.floor), hi, BATCH):
            self.add_leaves(await select(self.leaves_query(self.d),
                                         (start, min(start + BATCH, hi))))

    def read_sync(self, select: SyncSelect, lo: int, hi: int) -> None:
        for start in range(max(lo, self.floor), hi, BATCH):
            self.add_leaves(select(self.leaves_query(self.d), (start, min(start + BATCH, hi))))

    # -- the tree -------------------------------------------------------------

    def perfect(self, lo: int, size: int) -> bytes:
        """The hash of the complete subtree ``[lo, lo + size)``.

        Raises:
            NotFoundError: a leaf it needs was pruned (or not read) and nothing stored
                stands in for it.
            LedgerIntegrityError: the stored subtree standing in for pruned leaves is
                stored with two hashes.
        """
        level = size.bit_length() - 1
        key = (level, lo)
        found = self.computed.get(key)
        if found is not None:
            return found
        if lo + size <= self.floor:  # wholly pruned: only a stored stand-in
            if key in self.ambiguous:
                raise LedgerIntegrityError(
                    f"the stored Merkle tree holds two hashes for the subtree (level {level}, "
                    f"first leaf {lo}) that stands in for pruned entries")
            found = self.stored.get(key)
            if found is not None:
                return found
            if size == 1:
                raise NotFoundError(f"entry {lo + 1} is not in the ledger (pruned, or never "
                                    "there) and no stored subtree stands in for it")
        elif self.cached and key in self.stored and not self._read_whole(lo, size):
            return self.stored[key]
        elif level == TILE_LEVEL and lo + size <= self.vouched and key in self.stored:
            self.computed[key] = self.stored[key]
            return self.stored[key]
        if size == 1:
            leaf = self.leaves.get(lo)
            if leaf is None:
                raise NotFoundError(f"entry {lo + 1} is not in the ledger (pruned, or never "
                                    "there) and no stored subtree stands in for it")
            found = leaf
        elif level == TILE_LEVEL and lo >= self.floor:
            leaves = [self.leaves.get(i) for i in range(lo, lo + TILE)]
            if None in leaves:
                missing = lo + leaves.index(None)
                raise NotFoundError(f"entry {missing + 1} is not in the ledger (pruned, or "
                                    "never there) and no stored subtree stands in for it")
            found = _tile(leaves)  # type: ignore[arg-type]
        else:
            half = size >> 1
            found = merkle.node_hash(self.perfect(lo, half), self.perfect(lo + half, half))
        self.computed[key] = found
        if lo + size > self.floor:  # computed from leaves: what is stored is compared
            stored = self.stored.get(key)
            if (stored is not None and stored != found) or key in self.ambiguous:
                self.bad.append(key)
            elif stored is None and (level == TILE_LEVEL or key == (0, 0)):
                self.new_nodes.append(node_row(level, lo, found))
        return found

    def _read_whole(self, lo: int, size: int) -> bool:
        """Whether every leaf of ``[lo, lo + size)`` was read (a tile a proof reads)."""
        return size <= TILE and lo in self.leaves and lo + size - 1 in self.leaves

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
        """Compute every complete tile up to :attr:`size` that holds a leaf still in the
        chain (and leaf 0), comparing what is stored (:attr:`bad`) and adding those not
        stored to :attr:`new_nodes`; the leaves must have been read."""
        if self.size:
            self.perfect(0, 1)
        for lo in range(self.floor - self.floor % TILE, self.size - self.size % TILE, TILE):
            self.perfect(lo, TILE)

    def proof_leaves(self, indexes: Iterable[int]) -> list[tuple[int, int]]:
        """The leaf ranges an inclusion proof of ``indexes`` reads: each one's tile
        (or the partial tile at the end); stored tiles cover the rest, where they are."""
        ranges = {(i - i % TILE, min(i - i % TILE + TILE, self.size)) for i in indexes}
        tail = self.size - self.size % TILE
        if tail < self.size:
            ranges.add((tail, self.size))
        for lo in range(self.floor - self.floor % TILE, tail, TILE):
            if (TILE_LEVEL, lo) not in self.stored:  # no checkpoint stored it (or twice)
                ranges.add((lo, lo + TILE))
        return sorted(ranges)

    def bad_text(self) -> str:
        """:attr:`bad`, in words."""
        return "; ".join(f"the stored Merkle tile (level {level}, first leaf {lo}) is not the "
                         f"hash of entries {lo + 1}..{lo + (1 << level)}"
                         for level, lo in sorted(set(self.bad)))


def _bounds(rows: Rows) -> tuple[int, int]:
    if not rows or rows[0][0] is None:
        return 0, 0
    return int(rows[0][0]), int(rows[0][1])


async def open_tree(select: AsyncSelect, d: Dialect, size: int | None = None, *,
                    leaves: Iterable[int] = ()) -> Tree:
    """The tree of ``size`` leaves, stored tiles used as a cache, with what proving
    ``leaves`` (and its root) needs read. Check its root against a signed one before
    trusting a proof made from it; where it differs, :func:`fill` recomputes."""
    tree = await Tree.load(select, d, size, cached=True)
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
    """The tree of ``size`` leaves (default: the whole ledger) recomputed from every
    leaf still in the chain: its root, every tile not stored yet ready to store
    (:attr:`Tree.new_nodes`), and the stored ones that differ (:attr:`Tree.bad`)."""
    tree = await Tree.load(select, d, size)
    await tree.read(select, 0, tree.size)
    # Hashing every leaf is seconds of CPU on a large ledger: off the event loop, so a
    # server's turns and /healthz go on while its checkpointer signs.
    await asyncio.to_thread(_recompute, tree)
    return tree


async def extend(select: AsyncSelect, d: Dialect, size: int, signed_size: int,
                 signed_root: bytes) -> Tree | None:
    """The tree of ``size`` leaves, as :func:`fill` gives it, from the stored tiles under
    a checkpoint of ``signed_size`` entries already signed (``signed_root``) and the
    leaves after them; ``None`` when those tiles and leaves do not give that root (a
    tile missing, planted or stored twice, or an entry under it changed): the
    caller recomputes with :func:`fill`.

    Reads the tiles and about ``size - signed_size`` leaves, not the whole ledger.
    An entry under the signed checkpoint whose chain hash was changed in place is
    not seen here (its tile is taken as stored); ``verify --checkpoints`` names it.
    """
    tree = await Tree.load(select, d, size, vouched=signed_size)
    if tree.ambiguous or not 0 < signed_size <= size:
        return None
    if tree.floor == 0:
        await tree.read(select, 0, 1)  # leaf 0, the ledger's identity, from the chain
    missing = [lo for lo in range(tree.floor - tree.floor % TILE, tree.vouched, TILE)
               if (TILE_LEVEL, lo) not in tree.stored]
    for lo in missing:
        await tree.read(select, lo, lo + TILE)
    await tree.read(select, max(tree.vouched, tree.floor), size)
    if await asyncio.to_thread(tree.root, signed_size) != signed_root:
        return None
    await asyncio.to_thread(_recompute, tree)
    return tree


def _recompute(tree: Tree) -> None:
    tree.tiles()
    tree.root()


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
    stored yet, leaf 0, and the complete subtrees making up the range), every one
    recomputed from the leaves (or from the stand-ins of an earlier prune).

    A ledger whose pruned prefix has no stand-ins already gets none: its tree
    cannot be built (see the module docstring).

    Raises:
        LedgerIntegrityError: a subtree that would stand in for the removed entries is
            stored with a hash that is not theirs (planted): once they are gone, nothing
            could tell; the prune must not run.
    """
    tree = Tree.load_sync(select, d, through)
    if tree.floor > 0 and (0, 0) not in tree.stored:
        return []
    tree.read_sync(select, 0, through)
    tree.tiles()
    rows = list(tree.new_nodes)
    for lo, n in merkle.decomposition(0, through):
        level = n.bit_length() - 1
        tree.perfect(lo, n)
        if (level, lo) in tree.bad:
            raise LedgerIntegrityError(
                f"{tree.bad_text()}: it would stand in for entries this prune removes, so "
                "nothing was pruned; run `overt ledger verify --checkpoints`")
        if (level, lo) not in tree.stored and level != TILE_LEVEL and (level, lo) != (0, 0):
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
