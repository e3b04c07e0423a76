"""The Ledger page's newest signed checkpoint: what it says, and whether its
signature verifies with the configured public key.

The checkpoint is the newest ``ledger.checkpoint`` entry of the chain (see
:mod:`overt.ledger.checkpoints`): tree size, Merkle root, head hash, time, the
key that signed it and the signature. Its note is rebuilt from those fields in
its one written form and opened with the public key ``overt serve`` was given
(the ``.pub`` file beside ``[checkpoints] private_key``): a checkpoint whose
fields or signature were altered does not verify, and the page says so and why.
Whether the ledger still matches the checkpoint is ``overt ledger verify
--checkpoints``'s question (it reads the witness directory and the whole tree).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Literal

from overt.errors import ExtraMissingError, LedgerIntegrityError
from overt.events import LedgerCheckpointed
from overt.ledger.checkpoints import Checkpoint
from overt.ledger.reads import web
from overt.ledger.reads.base import readable
from overt.ledger.signing import DASH, PublicKey

KIND = "ledger.checkpoint"

Verdict = Literal["verified", "failed", "unchecked"]


@dataclass(frozen=True, slots=True)
class Newest:
    """The newest checkpoint on the record, and what checking its signature found."""

    seq: int
    event: LedgerCheckpointed
    verdict: Verdict
    why: str


async def newest(ledger: Any, key: PublicKey | None) -> Newest | None:
    """The newest checkpoint of ``ledger`` checked with ``key``; ``None`` when the
    ledger holds none (or offers no reads).

    Raises:
        LedgerError: the ledger could not be read, or the entry is not JSON.
        EventDecodeError: the entry lacks a field a checkpoint has.
    """
    if not readable(ledger):
        return None
    entry = await web.newest_of_kind(ledger, KIND)
    if entry is None:
        return None
    event = entry.event(LedgerCheckpointed)
    verdict, why = check(event, key)
    return Newest(entry.seq, event, verdict, why)


def check(event: LedgerCheckpointed, key: PublicKey | None) -> tuple[Verdict, str]:
    """Whether ``key`` signed the checkpoint ``event`` records, and why (not)."""
    if key is None:
        return "unchecked", ("no public key is configured: set [checkpoints] private_key, "
                             "with its .pub file beside it")
    if event.key_id != key.key_id:
        return "failed", f"it names the key {event.key_id}, not the configured {key.key_id}"
    try:
        root = base64.b64decode(event.root_hash, validate=True)
        body = Checkpoint(event.origin, event.tree_size, root, event.head_hash,
                          event.checkpoint_time, event.pruned_through).text()
        Checkpoint.open(f"{body}\n{DASH} {key.name} {event.signature}\n", key)
    except (binascii.Error, ValueError):
        return "failed", "its root hash is not base64"
    except LedgerIntegrityError as exc:
        return "failed", str(exc)
    except ExtraMissingError as exc:
        return "unchecked", str(exc)
    return "verified", f"with the configured public key {key.key_id}"
