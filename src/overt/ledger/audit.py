"""``verify --checkpoints``: the ledger against the signed checkpoints its witness holds.

The chain alone proves only that the database agrees with itself: someone who can
write the database can cut its tail, re-hash every entry after a change, or
delete a prefix and append a ``ledger.pruned`` entry sealing it. A signed
checkpoint made earlier is a reference point outside the database:

- *a truncated tail*: the ledger ends before the newest checkpoint's size;
- *a re-computed chain*, *any change to a checkpointed prefix*: after the chain
  verifies, entry N's chain hash must be the head hash each checkpoint of N
  entries signed (the chain hash commits to every entry before it, and to the
  hash a prune sealed), and the Merkle root of the first N entries, recomputed
  from the entries' chain hashes (the stored tree stands in only for a pruned
  prefix: see :mod:`.tree`), must be the signed root;
- *a planted Merkle tile*: every stored subtree that holds an entry still there
  is compared with the one recomputed; one that differs is named;
- *a forged prune*: the ledger is pruned further (or less) than the newest
  checkpoint signed (only ``overt ledger prune`` signs a prune, and only the range
  it removed), or its pruned prefix has no stored subtrees for the tree to stand
  on, or it holds a ``ledger.pruned`` entry that no prune wrote
  (:func:`.retention.judge`) and that the key has not disowned;

and successive checkpoints must follow each other (:func:`.check_successor`):
the same ledger, growing, each root in the same tree. :func:`witness_findings`
adds the witness directory's own gaps: a checkpoint the ledger recorded that it
lacks, or one of this ledger it holds without the key's signature.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overt.errors import ForgedSignatureError, LedgerIntegrityError, NotFoundError
from overt.ledger import merkle, retention, tree
from overt.ledger.base import VerifyReport
from overt.ledger.checkpoints import (
    ORIGIN_PREFIX,
    Checkpoint,
    check_successor,
    compute,
    dialect,
    origin_of,
    read_disowned,
    state,
)
from overt.ledger.signing import PublicKey
from overt.witness.refusals import read_refusals


@dataclass(frozen=True, slots=True)
class CheckpointReport:
    """What ``verify --checkpoints`` found; ``ok`` only if the chain verified too."""

    ok: bool
    chain: VerifyReport
    checkpoints: int
    newest_size: int | None = None
    newest_time: str | None = None
    checked: int = 0
    """Checkpoints whose root and head hash were recomputed from the ledger."""
    inside_pruned: int = 0
    """Checkpoints wholly inside the pruned prefix: checked against their successor."""
    problem: str | None = None
    unsigned: list[str] = field(default_factory=list)
    """Files in the witness directory that the key did not sign (path: why)."""
    notes: list[str] = field(default_factory=list)
    """What was found and let pass: disowned seals, checkpoints allowed missing."""


async def verify_against(ledger: Any, chain: VerifyReport, checkpoints: list[Checkpoint], *,
                         witness_dir: Path | None = None, key: PublicKey | None = None,
                         ) -> CheckpointReport:
    """Check ``ledger`` (whose chain ``verify`` gave ``chain``) against ``checkpoints``
    (valid, signed, by size), recomputing every root from the entries' chain hashes
    (the stored tree stands in only for a pruned prefix) and comparing every stored
    subtree that holds an entry still there. ``witness_dir`` and ``key``: where to
    find seals the key disowned (``overt ledger disown-seal``)."""
    if not checkpoints:
        return CheckpointReport(False, chain, 0, problem="no signed checkpoint to verify "
                                                         "against")
    newest = checkpoints[-1]
    notes: list[str] = []

    def failed(problem: str, checked: int = 0) -> CheckpointReport:
        return CheckpointReport(False, chain, len(checkpoints), newest.size, newest.time,
                                checked=checked, problem=problem, notes=notes)

    if not chain.ok:
        return failed(f"the chain itself fails: {chain.problem}")
    try:
        for old, new in itertools.pairwise(checkpoints):
            check_successor(old, new)
    except LedgerIntegrityError as exc:
        return failed(f"the witness's checkpoints disagree: {exc}")
    last = chain.last_seq or 0
    head, pruned = await state(ledger)
    if last < newest.size:
        return failed(f"the ledger ends at entry {last}, but the checkpoint of {newest.time} "
                      f"signed {newest.size} entries: its tail was cut")
    if pruned > newest.pruned:
        return failed(f"entries 1..{pruned} were removed by a prune no checkpoint signed (the "
                      f"newest says pruned through {newest.pruned}): a forged prune")
    if pruned < newest.pruned:
        return failed(f"the ledger holds entries {pruned + 1}..{newest.pruned}, which the "
                      f"checkpoint of {newest.time} signed as pruned")
    d = dialect(ledger)
    disowned = (read_disowned(witness_dir, key, newest.origin)
                if witness_dir is not None and key is not None else {})
    seals = []
    for seal in await retention.forged_seals(ledger.select, d):
        if disowned.get(seal.seq) == seal.hash:
            notes.append(f"disowned: {seal.text()}")
        else:
            seals.append(seal.text())
    if seals:
        return failed("; ".join(seals) + ": someone who can write to the database appended "
                      "it; see \"Signed checkpoints and proofs\" in the README for what to do")
    try:
        return await _recompute(ledger, chain, checkpoints, pruned, head, notes)
    except NotFoundError as exc:
        return failed(f"the pruned prefix has no stored tree to stand on ({exc}): entries "
                      "removed other than by overt's prune")
    except LedgerIntegrityError as exc:
        return failed(f"the stored Merkle tree is not the ledger's: {exc}")


async def _recompute(ledger: Any, chain: VerifyReport, checkpoints: list[Checkpoint],
                     pruned: int, head: int, notes: list[str]) -> CheckpointReport:
    """One pass over every entry still there: each checkpoint's root and head hash, and
    each stored subtree holding an entry, recomputed from the chain hashes (a whole
    tile at a time where no checkpoint ends inside it)."""
    newest = checkpoints[-1]
    d = dialect(ledger)
    t = tree.Tree(d, head, await ledger.select(tree.Tree.nodes_query(d), ()), floor=pruned)
    nodes = [t.perfect(lo, n) for lo, n in merkle.decomposition(0, pruned)]
    origin = ORIGIN_PREFIX + t.perfect(0, 1).hex()[:32] if pruned else None
    watch = set(t.stored) | set(t.ambiguous)
    levels = {level for level, _ in watch}
    inner: dict[int, list[tuple[int, int]]] = {}  # rows stored inside a tile, by tile
    for level, lo in watch:
        if 0 < level < tree.TILE_LEVEL and lo + (1 << level) > pruned:
            inner.setdefault(lo - lo % tree.TILE, []).append((level, lo))
    bad: list[tuple[int, int]] = []
    due = [cp for cp in checkpoints if cp.size > pruned]
    inside = len(checkpoints) - len(due)
    checked = 0
    size = pruned

    def failed(problem: str) -> CheckpointReport:
        return CheckpointReport(False, chain, len(checkpoints), newest.size, newest.time,
                                checked=checked, problem=problem, notes=notes)

    def compare(key: tuple[int, int], digest: bytes) -> None:
        if key in watch and (t.stored.get(key) != digest or key in t.ambiguous):
            bad.append(key)

    def push(digest: bytes, level: int) -> None:
        """Append a complete subtree of ``2**level`` leaves at ``size`` (a multiple)."""
        end, n = size + (1 << level), size >> level
        while n & 1:
            digest = sha256(b"\x01" + nodes.pop() + digest).digest()
            n >>= 1
            level += 1
            if level in levels:
                compare((level, end - (1 << level)), digest)
        nodes.append(digest)

    def signed(cp: Checkpoint, digest: str) -> str | None:
        if digest != cp.head:
            return (f"entry {cp.size} is not the one the checkpoint of {cp.time} signed: the "
                    "chain was changed and re-computed")
        if origin != cp.origin:
            return f"the ledger is {origin}, the checkpoint {cp.origin}"
        if merkle.Frontier(size, nodes).root() != cp.root:
            return (f"the Merkle root of the first {cp.size} entries is not the one the "
                    f"checkpoint of {cp.time} signed")
        return None

    sha256 = hashlib.sha256
    tile = tree.TILE
    starts = [pruned, *range(pruned - pruned % tree.BATCH + tree.BATCH, head, tree.BATCH)]
    for lo, hi in zip(starts, [*starts[1:], head], strict=True):
        rows = await ledger.select(tree.Tree.leaves_query(d), (lo, hi))
        i = 0
        while i < len(rows):
            whole = (size % tile == 0 and i + tile <= len(rows)
                     and not (due and due[0].size < size + tile))
            if whole and rows[i][0] == size + 1 and rows[i + tile - 1][0] == size + tile:
                leaves = [sha256(b"\x00" + h.encode("ascii")).digest()
                          for _, h in rows[i:i + tile]]
                if size == 0:
                    origin = ORIGIN_PREFIX + leaves[0].hex()[:32]
                    compare((0, 0), leaves[0])
                if size in inner:
                    perfect = merkle.perfect_over(leaves)
                    for level, first in inner[size]:
                        compare((level, first), perfect(first - size, 1 << level))
                level_hashes = leaves
                while len(level_hashes) > 1:
                    level_hashes = [sha256(b"\x01" + level_hashes[j] + level_hashes[j + 1]
                                           ).digest() for j in range(0, len(level_hashes), 2)]
                compare((tree.TILE_LEVEL, size), level_hashes[0])
                push(level_hashes[0], tree.TILE_LEVEL)
                size += tile
                i += tile
                last = rows[i - 1][1]
            else:
                seq, last = rows[i]
                if seq != size + 1:
                    return failed(f"entry {size + 1} is missing from the ledger")
                leaf = sha256(b"\x00" + last.encode("ascii")).digest()
                if size == 0:
                    origin = ORIGIN_PREFIX + leaf.hex()[:32]
                    compare((0, 0), leaf)
                push(leaf, 0)
                size += 1
                i += 1
            while due and due[0].size == size:
                cp = due.pop(0)
                problem = signed(cp, last)
                if problem is not None:
                    return failed(problem)
                checked += 1
    if due:
        return failed(f"the ledger ends at entry {size}, before the checkpoint of "
                      f"{due[0].size} entries")
    if bad:
        t.bad = bad
        return failed(t.bad_text() + ": stored by no overt code path (planted), it was "
                      "not used; see \"Signed checkpoints and proofs\" in the README")
    return CheckpointReport(True, chain, len(checkpoints), newest.size, newest.time,
                            checked=checked, inside_pruned=inside, notes=notes)


async def witness_findings(ledger: Any, key: PublicKey, found: list[tuple[Path, Checkpoint]],
                           unsigned: list[tuple[Path, LedgerIntegrityError]]) -> list[str]:
    """The checkpoints of this ledger that the witness directory lacks, or holds but not
    signed by ``key`` (``found``, ``unsigned``: what :func:`.read_witness_dir` gave):

    - a file there that holds a checkpoint of this ledger, of more entries than the
      ledger has now, not signed by the key (its signature taken off or changed; one
      that does not verify is a finding already). An older one signed by another key
      (one used before a key rotation) is passed over, as before;
    - a checkpoint the ledger recorded (a ``ledger.checkpoint`` entry, signed by
      ``key`` and taken by the directory) that no file there signed.

    Passed over, such a checkpoint would hide what it catches (a tail cut since the
    older ones)."""
    origin = found[-1][1].origin if found else await _origin(ledger)
    head, _ = await state(ledger)
    problems: list[str] = []
    for path, why in unsigned:
        if isinstance(why, ForgedSignatureError):
            continue  # reported as forged
        try:
            text = path.read_text(encoding="utf-8")
            body = Checkpoint.parse(text.split("\n\n", 1)[0] + "\n")
        except (OSError, UnicodeDecodeError, LedgerIntegrityError):
            continue  # not a checkpoint: another file
        if body.origin == origin and body.size > head:
            problems.append(f"{path.name} holds a checkpoint of this ledger of {body.size} "
                            f"entries ({body.time}), more than it has now, not signed by "
                            f"{key.key_id} ({why})")
    signed = {(c.size, c.time, c.root) for _, c in found}
    for entry in await ledger.entries(kinds=["ledger.checkpoint"]):
        data = entry.data
        try:
            said = (int(data["tree_size"]), str(data["checkpoint_time"]),
                    base64.b64decode(data["root_hash"], validate=True))
        except (KeyError, TypeError, ValueError):
            problems.append(f"entry {entry.seq} is not a ledger.checkpoint entry overt wrote")
            continue
        if data.get("key_id") != key.key_id or "dir" not in (data.get("witnesses") or ()):
            continue  # another key's, or the directory did not take it
        if said not in signed:
            problems.append(f"the ledger recorded (entry {entry.seq}) the checkpoint of "
                            f"{said[0]} entries ({said[1]}) that the witness directory lacks, "
                            f"or holds not signed by {key.key_id}")
    return problems


@dataclass(frozen=True, slots=True)
class WitnessConflict:
    """A checkpoint a witness cosigned, signed by the log's own key, that this ledger
    does not extend: ``what`` is ``fork`` (the ledger's first ``held.size`` entries give
    another root) or ``rollback`` (the ledger has fewer entries than it)."""

    what: str
    witnesses: tuple[str, ...]
    held: Checkpoint
    held_note: str
    sent_note: str

    def text(self) -> str:
        who = f"witness{'es' if len(self.witnesses) > 1 else ''} {', '.join(self.witnesses)}"
        if self.what == "rollback":
            return (f"rolled back: {who} cosigned a checkpoint of {self.held.size} entries "
                    f"({self.held.time}) signed by this log's key, and the ledger now has "
                    "fewer: its tail was cut and re-signed")
        return (f"a fork: {who} cosigned a checkpoint of {self.held.size} entries "
                f"({self.held.time}) signed by this log's key, and this ledger's first "
                f"{self.held.size} entries give another root; two checkpoints of one log "
                "that cannot both be true, both signed by its key")


async def witness_conflicts(ledger: Any, directory: Path, key: PublicKey
                            ) -> list[WitnessConflict]:
    """What the witnesses' refusals kept in ``directory`` show
    (:mod:`overt.witness.refusals`): each checkpoint a witness holds instead of ours,
    signed by ``key``, that this ledger does not extend. A refusal whose note ``key``
    did not sign, or that this ledger extends (a proof the witness found bad, a
    checkpoint it had not seen yet), shows nothing."""
    head, _ = await state(ledger)
    conflicts: dict[tuple[str, str, str], WitnessConflict] = {}  # one per pair of notes
    ours: dict[int, Checkpoint] = {}  # the ledger's own, by size: witnesses refuse alike
    for refusal in read_refusals(directory):
        try:
            held = Checkpoint.open(refusal.held, key)
        except LedgerIntegrityError:
            continue  # not the log's own signature: a witness cannot speak for it
        if held.size > head:
            what = "rollback"
        else:
            if held.size not in ours:
                ours[held.size] = (await compute(ledger, size=held.size))[0]
            if (ours[held.size].root, ours[held.size].origin) == (held.root, held.origin):
                continue
            what = "fork"
        pair = (what, refusal.held, refusal.sent)
        seen = conflicts.get(pair)
        conflicts[pair] = WitnessConflict(
            what, (*(seen.witnesses if seen else ()), refusal.witness), held, refusal.held,
            refusal.sent)
    return list(conflicts.values())


async def _origin(ledger: Any) -> str:
    t = await tree.Tree.load(ledger.select, dialect(ledger))
    await t.read(ledger.select, 0, 1)
    return origin_of(t)
