"""``verify --checkpoints``: the ledger against the signed checkpoints its witness holds.

The chain alone proves only that the database agrees with itself: someone who can
write the database can cut its tail, re-hash every entry after a change, or
delete a prefix and append a ``ledger.pruned`` entry sealing it. A signed
checkpoint made earlier is a reference point outside the database:

- *a truncated tail*: the ledger ends before the newest checkpoint's size;
- *a re-computed chain*, *any change to a checkpointed prefix*: after the chain
  verifies, entry N's chain hash must be the head hash each checkpoint of N
  entries signed (the chain hash commits to every entry before it, and to the
  hash a prune sealed), and the Merkle root of the first N entries, built from
  the stored tree and the chain, must be the signed root;
- *a forged prune*: the ledger is pruned further than the newest checkpoint
  signed (only ``overt ledger prune`` signs a prune), or its pruned prefix has
  no stored subtrees for the tree to stand on;

and successive checkpoints must follow each other (:func:`.check_successor`):
the same ledger, growing, each root in the same tree.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from overt.errors import LedgerIntegrityError, NotFoundError
from overt.ledger import tree
from overt.ledger.base import VerifyReport
from overt.ledger.checkpoints import Checkpoint, check_successor, dialect, origin_of, state


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


async def verify_against(ledger: Any, chain: VerifyReport,
                         checkpoints: list[Checkpoint]) -> CheckpointReport:
    """Check ``ledger`` (whose chain ``verify`` gave ``chain``) against ``checkpoints``
    (valid, signed, by size)."""
    if not checkpoints:
        return CheckpointReport(False, chain, 0, problem="no signed checkpoint to verify "
                                                         "against")
    newest = checkpoints[-1]

    def failed(problem: str, checked: int = 0) -> CheckpointReport:
        return CheckpointReport(False, chain, len(checkpoints), newest.size, newest.time,
                                checked=checked, problem=problem)

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
    d = dialect(ledger)
    checked = inside = 0
    try:
        t = await tree.Tree.load(ledger.select, d, head)
        for cp in checkpoints:
            if cp.size <= pruned:
                inside += 1
                continue
            lo = max(cp.size - cp.size % tree.TILE, pruned)
            await t.read(ledger.select, lo, cp.size)
            if origin_of(t) != cp.origin:
                return failed(f"the ledger is {origin_of(t)}, the checkpoint {cp.origin}",
                              checked)
            rows = await ledger.select(f"SELECT hash FROM audit_log WHERE seq = {d.ph}",
                                       (cp.size,))
            if not rows or rows[0][0] != cp.head:
                return failed(f"entry {cp.size} is not the one the checkpoint of {cp.time} "
                              "signed: the chain was changed and re-computed", checked)
            for lo, hi in t.proof_leaves(()):  # tiles no checkpoint stored, if any
                if hi <= cp.size:
                    await t.read(ledger.select, lo, hi)
            if t.root(cp.size) != cp.root:
                return failed(f"the Merkle root of the first {cp.size} entries is not the one "
                              f"the checkpoint of {cp.time} signed", checked)
            checked += 1
    except NotFoundError as exc:
        return failed(f"the pruned prefix has no stored tree to stand on ({exc}): entries "
                      "removed other than by overt's prune", checked)
    except LedgerIntegrityError as exc:
        return failed(f"the stored Merkle tree is not the ledger's: {exc}", checked)
    return CheckpointReport(True, chain, len(checkpoints), newest.size, newest.time,
                            checked=checked, inside_pruned=inside)
