"""Proofs an auditor checks with no database: a turn's entries in a signed checkpoint
(``overt ledger prove``), and one checkpoint extending another (``overt ledger
consistency``); ``overt ledger check-proof`` checks either with the public key.

An inclusion proof (``"format": "overt-inclusion-proof/1"``) holds the turn's
entries (the nine stored columns, ``data`` as its exact canonical JSON text),
the signed checkpoint note, the signing key's id, and the RFC 9162 inclusion
path of each entry: ``paths[i]`` lists indexes into ``nodes`` (base64 hashes,
each used, none twice), so the paths' shared upper nodes are written once.
Checking it recomputes each entry's chain hash from its columns, its leaf
(:func:`overt.ledger.merkle.entry_leaf`), and the root through its path, which
must be the signed root.

A consistency proof (``"format": "overt-consistency-proof/1"``) holds two signed
checkpoints and the RFC 9162 consistency proof between them.

A proof file is canonical JSON (:mod:`overt.ledger.canonical`) plus a newline,
and is refused in any other form, so every byte of it is checked: change one and
it fails.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from overt import json_input
from overt.errors import LedgerIntegrityError, NotFoundError, UsageError
from overt.ledger import merkle, tree
from overt.ledger.base import Entry
from overt.ledger.canonical import canonical_json, chain_hash, entry_payload
from overt.ledger.checkpoints import Checkpoint, check_successor, dialect
from overt.ledger.signing import PublicKey

INCLUSION = "overt-inclusion-proof/1"
CONSISTENCY = "overt-consistency-proof/1"
_ENTRY_KEYS = ("at", "data", "hash", "id", "kind", "prev_hash", "seq", "session_id", "turn_id")


@dataclass(frozen=True, slots=True)
class Checked:
    """What a proof showed: ``entries`` (or ``old_size``) in a tree of ``size`` entries
    signed by ``key_id`` at ``time``."""

    format: str
    origin: str
    size: int
    time: str
    key_id: str
    turn_id: str | None = None
    entries: int = 0
    old_size: int | None = None


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def dump(proof: dict[str, Any]) -> str:
    """The one written form of a proof file."""
    return canonical_json(proof) + "\n"


async def prove(ledger: Any, turn_id: str, note: str, checkpoint: Checkpoint,
                key: PublicKey) -> dict[str, Any]:
    """The inclusion proof of turn ``turn_id``'s entries in ``checkpoint`` (``note``,
    signed by ``key``). Reads the turn, the stored tree and the tiles its entries
    sit in: a few hundred rows, whatever the ledger's size.

    Raises:
        NotFoundError: no such turn.
        UsageError: the turn has entries after the checkpoint (make one first).
        NotFoundError: an entry of the turn was pruned.
        LedgerIntegrityError: the ledger's tree does not give the checkpoint's root.
    """
    entries: list[Entry] = await ledger.entries(turn_id=turn_id)
    if not entries:
        raise NotFoundError(f"no turn {turn_id!r}")
    if entries[-1].seq > checkpoint.size:
        raise UsageError(
            f"turn {turn_id} has entries after the newest checkpoint ({checkpoint.size} "
            "entries): make one first (`overt ledger checkpoint`)")
    d = dialect(ledger)
    t = await tree.open_tree(ledger.select, d, checkpoint.size,
                             leaves=[e.seq - 1 for e in entries])
    if t.root() != checkpoint.root:
        raise LedgerIntegrityError(f"the ledger's tree of {checkpoint.size} entries does not "
                                   "have the checkpoint's root: run `overt ledger verify "
                                   "--checkpoints`")
    nodes: list[str] = []
    index: dict[bytes, int] = {}
    paths: list[list[int]] = []
    for entry in entries:
        path = []
        for digest in t.inclusion(entry.seq - 1):
            if digest not in index:
                index[digest] = len(nodes)
                nodes.append(_b64(digest))
            path.append(index[digest])
        paths.append(path)
    return {"format": INCLUSION, "turn_id": turn_id, "checkpoint": note,
            "key_id": key.key_id, "nodes": nodes, "paths": paths,
            "entries": [_entry_columns(e) for e in entries]}


def _entry_columns(entry: Entry) -> dict[str, Any]:
    columns = entry.to_dict()
    columns["data"] = canonical_json(entry.data)
    return columns


async def consistency(ledger: Any, old: tuple[str, Checkpoint], new: tuple[str, Checkpoint],
                      key: PublicKey) -> dict[str, Any]:
    """The consistency proof of two checkpoints (notes and what they say), from the
    ledger's tree.

    Raises:
        LedgerIntegrityError: the newer does not extend the older in this ledger.
        NotFoundError: the older lies in a pruned prefix the stored tree cannot prove.
    """
    (old_note, old_cp), (new_note, new_cp) = old, new
    check_successor(old_cp, new_cp)
    # the old size's tile (the proof splits it), the new size's partial one, and
    # tiles no checkpoint stored
    t = await tree.open_tree(ledger.select, dialect(ledger), new_cp.size,
                             leaves=[old_cp.size - 1, min(old_cp.size, new_cp.size - 1)])
    proof = t.consistency(old_cp.size) if old_cp.size else []
    if not merkle.verify_consistency(old_cp.size, new_cp.size, old_cp.root, new_cp.root, proof):
        raise LedgerIntegrityError(f"the checkpoint of {new_cp.size} entries does not extend "
                                   f"the one of {old_cp.size} in this ledger")
    return {"format": CONSISTENCY, "key_id": key.key_id, "old": old_note, "new": new_note,
            "proof": [_b64(p) for p in proof]}


def check(text: bytes, key: PublicKey) -> Checked:
    """Check a proof file's bytes with ``key`` alone.

    Raises:
        LedgerIntegrityError: anything in it does not hold.
    """
    try:
        decoded = text.decode("utf-8")
        proof = json_input.loads(decoded, what="the proof")
    except (UnicodeDecodeError, ValueError) as exc:
        raise LedgerIntegrityError(f"not a proof: {exc}") from exc
    if not isinstance(proof, dict) or dump(proof) != decoded:
        raise LedgerIntegrityError("not a proof in its one written form (canonical JSON and "
                                   "a newline)")
    if proof.get("key_id") != key.key_id:
        raise LedgerIntegrityError(f"the proof names key {proof.get('key_id')!r}, not "
                                   f"{key.key_id}")
    if proof.get("format") == INCLUSION:
        return _check_inclusion(proof, key)
    if proof.get("format") == CONSISTENCY:
        return _check_consistency(proof, key)
    raise LedgerIntegrityError(f"unknown proof format {proof.get('format')!r}")


def _keys(obj: Any, keys: Sequence[str], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or sorted(obj) != sorted(keys):
        raise LedgerIntegrityError(f"{what} must hold exactly {', '.join(sorted(keys))}")
    return obj


def _hash(text: Any) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32 or _b64(raw) != text:
        raise LedgerIntegrityError(f"not a base64 SHA-256 hash: {str(text)[:60]!r}")
    return raw


def _checkpoint(note: Any, key: PublicKey) -> Checkpoint:
    if not isinstance(note, str):
        raise LedgerIntegrityError("a checkpoint is a signed note (text)")
    return Checkpoint.open(note, key)


def _check_inclusion(proof: dict[str, Any], key: PublicKey) -> Checked:
    _keys(proof, ("checkpoint", "entries", "format", "key_id", "nodes", "paths", "turn_id"),
          "an inclusion proof")
    cp = _checkpoint(proof["checkpoint"], key)
    turn_id, entries, paths = proof["turn_id"], proof["entries"], proof["paths"]
    nodes = [_hash(n) for n in proof["nodes"]] if isinstance(proof["nodes"], list) else None
    if (not isinstance(turn_id, str) or not isinstance(entries, list) or not entries
            or nodes is None or not isinstance(paths, list) or len(paths) != len(entries)):
        raise LedgerIntegrityError("an inclusion proof holds a turn id, its entries, and a "
                                   "path of node indexes for each")
    if len(set(nodes)) != len(nodes):
        raise LedgerIntegrityError("a node is listed twice")
    used: set[int] = set()
    previous: dict[str, Any] | None = None
    for columns, path in zip(entries, paths, strict=True):
        _keys(columns, _ENTRY_KEYS, "an entry")
        seq = columns["seq"]
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 < seq <= cp.size:
            raise LedgerIntegrityError(f"entry seq {seq!r} is not in the tree of {cp.size}")
        if columns["turn_id"] != turn_id:
            raise LedgerIntegrityError(f"entry {seq} is not of turn {turn_id}")
        if previous is not None and (seq <= previous["seq"] or (
                seq == previous["seq"] + 1 and columns["prev_hash"] != previous["hash"])):
            raise LedgerIntegrityError(f"entry {seq} does not follow entry {previous['seq']}")
        computed = _entry_hash(columns)
        if computed != columns["hash"]:
            raise LedgerIntegrityError(f"entry {seq}'s columns do not give its hash")
        if not isinstance(path, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(nodes)
                for i in path):
            raise LedgerIntegrityError(f"entry {seq}'s path is not a list of node indexes")
        used.update(path)
        if not merkle.verify_inclusion(merkle.entry_leaf(computed), seq - 1, cp.size,
                                       [nodes[i] for i in path], cp.root):
            raise LedgerIntegrityError(f"entry {seq} is not in the tree the checkpoint signed")
        previous = columns
    if len(used) != len(nodes):
        raise LedgerIntegrityError("the proof lists nodes no path uses")
    return Checked(INCLUSION, cp.origin, cp.size, cp.time, key.key_id, turn_id, len(entries))


def _entry_hash(columns: dict[str, Any]) -> str:
    try:
        data = columns["data"]
        if not isinstance(data, str) or canonical_json(json.loads(data)) != data:
            raise ValueError("data is not canonical JSON text")
        text = [columns[k] for k in ("id", "kind", "at", "prev_hash", "hash")]
        if not all(isinstance(v, str) for v in text) or not all(
                v is None or isinstance(v, str)
                for v in (columns["turn_id"], columns["session_id"])):
            raise ValueError("a column of the wrong type")
        payload = entry_payload(columns["seq"], columns["id"], columns["kind"], columns["at"],
                                columns["turn_id"], columns["session_id"], data)
        return chain_hash(columns["prev_hash"], payload)
    except (ValueError, TypeError) as exc:
        raise LedgerIntegrityError(f"entry {columns.get('seq')!r}: {exc}") from exc


def _check_consistency(proof: dict[str, Any], key: PublicKey) -> Checked:
    _keys(proof, ("format", "key_id", "new", "old", "proof"), "a consistency proof")
    old, new = _checkpoint(proof["old"], key), _checkpoint(proof["new"], key)
    if not isinstance(proof["proof"], list):
        raise LedgerIntegrityError("a consistency proof's proof is a list of hashes")
    hashes = [_hash(h) for h in proof["proof"]]
    check_successor(old, new)
    if not merkle.verify_consistency(old.size, new.size, old.root, new.root, hashes):
        raise LedgerIntegrityError(f"the checkpoint of {new.size} entries does not extend the "
                                   f"one of {old.size}")
    return Checked(CONSISTENCY, new.origin, new.size, new.time, key.key_id,
                   old_size=old.size)
