"""The Merkle tree over the ledger's entries, hashed as RFC 9162 (Certificate
Transparency 2.0) does. Pure functions; no storage.

Hashes
    ``leaf_hash(d) = SHA-256(0x00 || d)``, ``node_hash(l, r) = SHA-256(0x01 || l || r)``,
    the empty tree's hash ``SHA-256()``. The tree over ``n`` leaves splits at the
    largest power of two ``k < n``: ``MTH(D[n]) = node_hash(MTH(D[0:k]), MTH(D[k:n]))``.

Leaves
    Leaf ``i`` is the entry with ``seq = i + 1``, and its bytes are the entry's chain
    hash as stored (``"sha256:" + 64 hex digits``, ASCII). The chain hash commits to
    the entry's seven fields and to the hash before it (see
    :mod:`overt.ledger.canonical`), so an auditor holding an entry recomputes its
    chain hash from the entry, then its leaf, then the root through the proof.

Subtrees
    Everything here reads the tree through one function, ``perfect(lo, size)``: the
    hash of the complete subtree over leaves ``[lo, lo + size)``, ``size`` a power of
    two and ``lo`` a multiple of it. A list of leaf hashes gives one
    (:func:`perfect_over`); the ledger's stored nodes give another
    (:mod:`overt.ledger.tree`), so proving one entry reads a few hundred rows, not
    the ledger.

Proofs and their verification follow RFC 9162 §2.1.3 (inclusion) and §2.1.4
(consistency) word for word.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

Perfect = Callable[[int, int], bytes]
"""``perfect(lo, size)``: the hash of the complete subtree over ``[lo, lo + size)``."""

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def entry_leaf(chain_hash: str) -> bytes:
    """The leaf hash of the entry whose stored chain hash is ``chain_hash``."""
    return hashlib.sha256(b"\x00" + chain_hash.encode("ascii")).digest()


def split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def mth(perfect: Perfect, lo: int, hi: int) -> bytes:
    """``MTH(D[lo:hi])`` (``lo`` aligned as RFC 9162's recursion leaves it)."""
    n = hi - lo
    if n == 0:
        return EMPTY_ROOT
    if n & (n - 1) == 0:
        return perfect(lo, n)
    k = split(n)
    return node_hash(perfect(lo, k), mth(perfect, lo + k, hi))


def root(perfect: Perfect, size: int) -> bytes:
    """The root hash of the tree of ``size`` leaves."""
    return mth(perfect, 0, size)


def inclusion_proof(perfect: Perfect, index: int, size: int) -> list[bytes]:
    """``PATH(index, D[size])`` (RFC 9162 §2.1.3.1).

    Raises:
        ValueError: ``index`` is not a leaf of the tree.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    path: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = split(hi - lo)
        if index < lo + k:
            path.append(mth(perfect, lo + k, hi))
            hi = lo + k
        else:
            path.append(perfect(lo, k))
            lo += k
    path.reverse()
    return path


def consistency_proof(perfect: Perfect, old: int, new: int) -> list[bytes]:
    """``PROOF(old, D[new])`` (RFC 9162 §2.1.4.1).

    Raises:
        ValueError: ``old`` is not between 1 and ``new``.
    """
    if not 0 < old <= new:
        raise ValueError(f"no consistency proof from {old} to {new}")
    proof: list[bytes] = []
    lo, hi, complete = 0, new, True
    while True:
        m = old - lo
        if m == hi - lo:
            if not complete:
                proof.append(mth(perfect, lo, hi))
            break
        k = split(hi - lo)
        if m <= k:
            proof.append(mth(perfect, lo + k, hi))
            hi = lo + k
        else:
            proof.append(perfect(lo, k))
            lo += k
            complete = False
    proof.reverse()
    return proof


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes],
                     root_hash: bytes) -> bool:
    """Whether ``proof`` shows the leaf hash ``leaf`` at ``index`` in the tree of
    ``size`` whose root is ``root_hash`` (RFC 9162 §2.1.3.2)."""
    if index >= size or index < 0:
        return False
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root_hash


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """Whether ``proof`` shows the tree of ``new`` leaves with root ``new_root``
    extends the tree of ``old`` leaves with root ``old_root`` (RFC 9162 §2.1.4.2)."""
    if old <= 0 or old > new:
        return False
    if old == new:
        return not proof and old_root == new_root
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is the proof's first node
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


def perfect_over(leaves: Sequence[bytes]) -> Perfect:
    """``perfect`` over a list of leaf hashes, computed (and kept) as asked."""
    cache: dict[tuple[int, int], bytes] = {}

    def perfect(lo: int, size: int) -> bytes:
        if size == 1:
            return leaves[lo]
        key = (lo, size)
        found = cache.get(key)
        if found is None:
            half = size // 2
            found = cache[key] = node_hash(perfect(lo, half), perfect(lo + half, half))
        return found

    return perfect


def decomposition(lo: int, hi: int) -> list[tuple[int, int]]:
    """The complete subtrees ``(start, size)`` that make up ``[lo, hi)``, largest aligned
    first, left to right (with ``lo = 0``: those a tree of ``hi`` leaves is built from)."""
    out: list[tuple[int, int]] = []
    while lo < hi:
        size = lo & -lo if lo else 1 << (hi.bit_length() - 1)
        while lo + size > hi:
            size >>= 1
        out.append((lo, size))
        lo += size
    return out


class Frontier:
    """The right edge of a tree being built leaf by leaf (a compact range from 0): the
    complete subtrees its leaves make up so far, largest first. Memory is ``log n``;
    :meth:`root` gives ``MTH`` of the leaves so far at any size, so one pass over a
    ledger checks every checkpoint's root."""

    __slots__ = ("nodes", "size")

    def __init__(self, size: int = 0, nodes: Iterable[bytes] = ()) -> None:
        """Start at ``size`` leaves from the hashes of ``decomposition(0, size)``.

        Raises:
            ValueError: the number of hashes does not fit ``size``.
        """
        self.size = size
        self.nodes = list(nodes)
        if len(self.nodes) != size.bit_count():
            raise ValueError(f"a tree of {size} leaves has {size.bit_count()} edge subtrees, "
                             f"not {len(self.nodes)}")

    def push(self, leaf: bytes) -> None:
        """Append one leaf hash."""
        nodes = self.nodes
        size = self.size
        while size & 1:
            leaf = node_hash(nodes.pop(), leaf)
            size >>= 1
        nodes.append(leaf)
        self.size += 1

    def root(self) -> bytes:
        """``MTH`` of the leaves so far."""
        if not self.nodes:
            return EMPTY_ROOT
        nodes = self.nodes
        r = nodes[-1]
        for n in reversed(nodes[:-1]):
            r = node_hash(n, r)
        return r
