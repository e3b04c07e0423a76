"""Proofs an auditor checks with no database: a turn's entries in a signed checkpoint
(``overt ledger prove``), one entry (``prove --entry``), and one checkpoint extending
another (``overt ledger consistency``); ``overt ledger check-proof`` checks any of
them with the public key.

An inclusion proof (``"format": "overt-inclusion-proof/2"``) holds entries (the nine
stored columns, ``data`` as its exact canonical JSON text), the signed checkpoint
note, the signing key's id, and the RFC 9162 inclusion path of each entry:
``paths[i]`` lists indexes into ``nodes`` (base64 hashes, each used, none twice),
so the paths' shared upper nodes are written once. Checking it recomputes each
entry's chain hash from its columns, its leaf
(:func:`overt.ledger.merkle.entry_leaf`), and the root through its path, which
must be the signed root. Its ``scope`` says what it proves:

- ``"turn"``: the whole turn. ``turn_entries`` is how many entries the turn has
  in the checkpoint's tree and ``completed_seq`` the seq of its ``turn.completed``
  (``null``: the turn was still in progress). The proof must hold exactly that
  many, all of the turn, its ``turn.completed`` where it says; and what the signed
  ``turn.completed`` itself counts must be there (at least as many
  ``tool_call.completed`` entries as its ``tool_calls``, as many ``inference``
  entries as its ``model_calls``; a ``tool_call.started`` before each call that
  ran). Leave an entry out and it fails.
- ``"entry"``: one entry, and nothing about the rest of its turn.

A proof in the first format (``overt-inclusion-proof/1``, before overt said how
many entries a turn has) is still checked, entry by entry, and reported as a proof
of those entries only: it cannot show that none of the turn's was left out.

A consistency proof (``"format": "overt-consistency-proof/1"``) holds two signed
checkpoints and the RFC 9162 consistency proof between them.

A proof file is canonical JSON (:mod:`overt.ledger.canonical`) plus a newline,
and is refused in any other form, so every byte of it is checked: change one and
it fails.

Making a proof reads the stored tiles as a cache; the root they give must be the
signed root, or the tree is recomputed from the entries (a stored tile that is
not the hash of its leaves is reported and never used).
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
from overt.ledger.chain import row_to_entry
from overt.ledger.checkpoints import Checkpoint, check_successor, dialect
from overt.ledger.signing import PublicKey

INCLUSION = "overt-inclusion-proof/2"
INCLUSION_V1 = "overt-inclusion-proof/1"
CONSISTENCY = "overt-consistency-proof/1"
TURN, ENTRY, ENTRIES = "turn", "entry", "entries"
_ENTRY_KEYS = ("at", "data", "hash", "id", "kind", "prev_hash", "seq", "session_id", "turn_id")
_TURN_KEYS = ("checkpoint", "completed_seq", "entries", "format", "key_id", "nodes", "paths",
              "scope", "turn_entries", "turn_id")
_ENTRY_PROOF_KEYS = ("checkpoint", "entries", "format", "key_id", "nodes", "paths", "scope")
_V1_KEYS = ("checkpoint", "entries", "format", "key_id", "nodes", "paths", "turn_id")


@dataclass(frozen=True, slots=True)
class Checked:
    """What a proof showed: ``entries`` (or ``old_size``) in a tree of ``size`` entries
    signed by ``key_id`` at ``time``. ``scope``: ``turn`` (the whole turn: ``completed_seq``
    its ``turn.completed``, ``None`` while it was in progress), ``entry`` (one entry), or
    ``entries`` (a first-format proof: these entries, maybe not all of the turn's)."""

    format: str
    origin: str
    size: int
    time: str
    key_id: str
    turn_id: str | None = None
    entries: int = 0
    old_size: int | None = None
    scope: str | None = None
    completed_seq: int | None = None
    seq: int | None = None
    kind: str | None = None


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def dump(proof: dict[str, Any]) -> str:
    """The one written form of a proof file."""
    return canonical_json(proof) + "\n"


async def _proving_tree(ledger: Any, size: int, leaves: list[int], root: bytes,
                        found: list[str] | None) -> tree.Tree:
    """The tree of ``size`` entries that gives the signed ``root``: from the stored tiles
    (a few rows) where they give it, else recomputed from every entry (the stored tiles
    that differ are added to ``found``).

    Raises:
        LedgerIntegrityError: not even the entries give the signed root.
    """
    d = dialect(ledger)
    t = await tree.open_tree(ledger.select, d, size, leaves=leaves)
    try:
        if t.root() == root:
            return t
    except NotFoundError:
        pass
    t = await tree.fill(ledger.select, d, size)
    if t.root() != root:
        raise LedgerIntegrityError(f"the ledger's tree of {size} entries does not have the "
                                   "checkpoint's root: run `overt ledger verify --checkpoints`")
    if t.bad and found is not None:
        found.append(t.bad_text() + " (not used: the proof was made from the entries)")
    return t


def _paths(t: tree.Tree, entries: list[Entry]) -> tuple[list[str], list[list[int]]]:
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
    return nodes, paths


async def prove(ledger: Any, turn_id: str, note: str, checkpoint: Checkpoint,
                key: PublicKey, *, found: list[str] | None = None) -> dict[str, Any]:
    """The inclusion proof of the whole turn ``turn_id`` (every entry of it in
    ``checkpoint``, ``note`` signed by ``key``). Reads the turn, the stored tree and the
    tiles its entries sit in: a few hundred rows, whatever the ledger's size (the
    whole ledger where a stored tile is not the hash of its leaves: see ``found``).

    Raises:
        NotFoundError: no such turn, or an entry of the turn was pruned.
        UsageError: the turn has entries after the checkpoint (make one first), or a
            prune cut it in two (prove its entries one by one).
        LedgerIntegrityError: the ledger's tree does not give the checkpoint's root.
    """
    entries: list[Entry] = await ledger.entries(turn_id=turn_id)
    if not entries:
        raise NotFoundError(f"no turn {turn_id!r}")
    if entries[-1].seq > checkpoint.size:
        raise UsageError(
            f"turn {turn_id} has entries after the newest checkpoint ({checkpoint.size} "
            "entries): make one first (`overt ledger checkpoint`)")
    if entries[0].kind != "turn.started" and entries[0].seq <= checkpoint.pruned + 1 \
            and checkpoint.pruned:
        raise UsageError(f"turn {turn_id} began before entry {checkpoint.pruned + 1}, where "
                         "the ledger was pruned: its first entries are gone, so no proof can "
                         "show the whole turn; prove its entries one by one (`overt ledger "
                         "prove --entry SEQ`)")
    t = await _proving_tree(ledger, checkpoint.size, [e.seq - 1 for e in entries],
                            checkpoint.root, found)
    nodes, paths = _paths(t, entries)
    completed = [e.seq for e in entries if e.kind == "turn.completed"]
    return {"format": INCLUSION, "scope": TURN, "turn_id": turn_id,
            "turn_entries": len(entries), "completed_seq": completed[0] if completed else None,
            "checkpoint": note, "key_id": key.key_id, "nodes": nodes, "paths": paths,
            "entries": [_entry_columns(e) for e in entries]}


async def prove_entry(ledger: Any, seq: int, note: str, checkpoint: Checkpoint,
                      key: PublicKey, *, found: list[str] | None = None) -> dict[str, Any]:
    """The inclusion proof of entry ``seq`` alone (labelled so: it says nothing about
    the rest of its turn).

    Raises:
        NotFoundError: no such entry (or it was pruned).
        UsageError: the entry is after the checkpoint.
        LedgerIntegrityError: the ledger's tree does not give the checkpoint's root.
    """
    rows = await ledger.select(
        "SELECT seq, id, kind, at, turn_id, session_id, data, prev_hash, hash FROM audit_log "
        f"WHERE seq = {dialect(ledger).ph}", (seq,))
    entries = [row_to_entry(r) for r in rows]
    if not entries:
        raise NotFoundError(f"no entry {seq} in the ledger (pruned, or never there)")
    if seq > checkpoint.size:
        raise UsageError(f"entry {seq} is after the newest checkpoint ({checkpoint.size} "
                         "entries): make one first (`overt ledger checkpoint`)")
    t = await _proving_tree(ledger, checkpoint.size, [seq - 1], checkpoint.root, found)
    nodes, paths = _paths(t, entries)
    return {"format": INCLUSION, "scope": ENTRY, "checkpoint": note, "key_id": key.key_id,
            "nodes": nodes, "paths": paths, "entries": [_entry_columns(entries[0])]}


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
    d = dialect(ledger)
    t = await tree.open_tree(ledger.select, d, new_cp.size,
                             leaves=[old_cp.size - 1, min(old_cp.size, new_cp.size - 1)])
    proof = t.consistency(old_cp.size) if old_cp.size else []
    if not merkle.verify_consistency(old_cp.size, new_cp.size, old_cp.root, new_cp.root, proof):
        # a stored tile that is not its leaves' hash: recompute from the entries
        t = await tree.fill(ledger.select, d, new_cp.size)
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
    if proof.get("format") in (INCLUSION, INCLUSION_V1):
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
    if proof["format"] == INCLUSION_V1:
        scope = ENTRIES
        _keys(proof, _V1_KEYS, "an inclusion proof (format 1)")
    else:
        said = proof.get("scope")
        if said not in (TURN, ENTRY):
            raise LedgerIntegrityError(f"an inclusion proof's scope is turn or entry, not "
                                       f"{str(said)[:40]!r}")
        scope = str(said)
        _keys(proof, _TURN_KEYS if scope == TURN else _ENTRY_PROOF_KEYS,
              f"an inclusion proof of {'a whole turn' if scope == TURN else 'one entry'}")
    cp = _checkpoint(proof["checkpoint"], key)
    turn_id, entries, paths = proof.get("turn_id"), proof["entries"], proof["paths"]
    nodes = [_hash(n) for n in proof["nodes"]] if isinstance(proof["nodes"], list) else None
    if (not isinstance(entries, list) or not entries or nodes is None
            or not isinstance(paths, list) or len(paths) != len(entries)
            or (scope != ENTRY and not isinstance(turn_id, str))
            or (scope == ENTRY and len(entries) != 1)):
        raise LedgerIntegrityError("an inclusion proof holds its entries (of one turn, or "
                                   "one entry), and a path of node indexes for each")
    if len(set(nodes)) != len(nodes):
        raise LedgerIntegrityError("a node is listed twice")
    _check_entries(entries, paths, nodes, cp, "proof")
    if scope != ENTRY:
        for columns in entries:
            if columns["turn_id"] != turn_id:
                raise LedgerIntegrityError(f"entry {columns['seq']} is not of turn {turn_id}")
    completed = None
    if scope == TURN:
        completed = _whole_turn(proof, entries, cp.size)
    first = entries[0]
    return Checked(proof["format"], cp.origin, cp.size, cp.time, key.key_id,
                   turn_id if scope != ENTRY else first["turn_id"], len(entries), scope=scope,
                   completed_seq=completed, seq=first["seq"] if scope == ENTRY else None,
                   kind=first["kind"] if scope == ENTRY else None)


def _check_entries(entries: list[Any], paths: list[Any], nodes: list[bytes], cp: Checkpoint,
                   what: str) -> None:
    """That ``entries`` (their columns) are in ``seq`` order, chained where one follows
    another, each giving its hash and in the tree ``cp`` signed by its path of indexes
    into ``nodes``, and that every node is on some path (``what``: the proof or the
    bundle, as the message names it).

    Raises:
        LedgerIntegrityError: one of them is not.
    """
    used: set[int] = set()
    previous: dict[str, Any] | None = None
    for columns, path in zip(entries, paths, strict=True):
        _keys(columns, _ENTRY_KEYS, "an entry")
        seq = columns["seq"]
        if not _is_int(seq) or not 0 < seq <= cp.size:
            raise LedgerIntegrityError(f"entry seq {str(seq)[:40]!r} is not in the tree of "
                                       f"{cp.size}")
        if previous is not None and (seq <= previous["seq"] or (
                seq == previous["seq"] + 1 and columns["prev_hash"] != previous["hash"])):
            raise LedgerIntegrityError(f"entry {seq} does not follow entry {previous['seq']}")
        computed = _entry_hash(columns)
        if computed != columns["hash"]:
            raise LedgerIntegrityError(f"entry {seq}'s columns do not give its hash")
        if not isinstance(path, list) or not all(_is_int(i) and 0 <= i < len(nodes)
                                                 for i in path):
            raise LedgerIntegrityError(f"entry {seq}'s path is not a list of node indexes")
        used.update(path)
        if not merkle.verify_inclusion(merkle.entry_leaf(computed), seq - 1, cp.size,
                                       [nodes[i] for i in path], cp.root):
            raise LedgerIntegrityError(f"entry {seq} is not in the tree the checkpoint signed")
        previous = columns
    if len(used) != len(nodes):
        raise LedgerIntegrityError(f"the {what} lists nodes no path uses")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _whole_turn(proof: dict[str, Any], entries: list[dict[str, Any]], size: int) -> int | None:
    """That ``entries`` (checked, in seq order) are the whole turn the proof says: as many
    as it counts, its ``turn.completed`` where it says, and what that signed entry
    counts all there; the ``turn.completed`` seq (``None``: in progress).

    Raises:
        LedgerIntegrityError: an entry of the turn is missing.
    """
    count, completed = proof["turn_entries"], proof["completed_seq"]
    if not isinstance(count, int) or isinstance(count, bool) or count != len(entries):
        raise LedgerIntegrityError(f"the proof says the turn has {count!r} entries, but holds "
                                   f"{len(entries)}: entries of the turn are missing")
    ends = [e for e in entries if e["kind"] == "turn.completed"]
    if completed is None:
        if ends:
            raise LedgerIntegrityError("the proof says the turn is in progress, but holds its "
                                       f"turn.completed (entry {ends[0]['seq']})")
        return None
    if not isinstance(completed, int) or isinstance(completed, bool) or \
            [e["seq"] for e in ends] != [completed]:
        raise LedgerIntegrityError(f"the proof says the turn completed at entry {completed!r}, "
                                   "but does not hold that turn.completed entry: entries of "
                                   "the turn are missing")
    done = json.loads(ends[0]["data"])
    kinds = [e["kind"] for e in entries]
    for kind, field_name in (("tool_call.completed", "tool_calls"),
                             ("inference", "model_calls")):
        said = done.get(field_name)
        if isinstance(said, int) and kinds.count(kind) < said:
            raise LedgerIntegrityError(
                f"the turn's turn.completed (entry {completed}) counts {said} "
                f"{field_name.replace('_', ' ')}, but the proof holds {kinds.count(kind)} "
                f"{kind} entries: entries of the turn are missing")
    started = {json.dumps(json.loads(e["data"]).get("tool_call_id"))  # any JSON value
               for e in entries if e["kind"] == "tool_call.started"}
    for e in entries:
        if e["kind"] != "tool_call.completed":
            continue
        data = json.loads(e["data"])
        if data.get("tool_status") == "ok" and not data.get("provided_by") and \
                json.dumps(data.get("tool_call_id")) not in started:
            raise LedgerIntegrityError(
                f"tool call {data.get('tool_call_id')!r} ran (entry {e['seq']}), but the proof "
                "holds no tool_call.started for it: entries of the turn are missing")
    return completed


def _entry_hash(columns: dict[str, Any]) -> str:
    try:
        data = columns["data"]
        if not isinstance(data, str) or canonical_json(
                json_input.loads(data, what="the entry's data")) != data:
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
