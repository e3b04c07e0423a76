"""What a witness refused, kept on the log's side: the checkpoint it was sent, and the
one it had cosigned instead, so that ``overt ledger verify --checkpoints`` can report
a fork or a rollback with both checkpoints (:func:`overt.ledger.audit.witness_conflicts`).

A witness that refuses a checkpoint because it conflicts with one it cosigned (a
fork, a proof that does not reach its root, a smaller size) answers with that note
(:mod:`overt.witness.add`). The refusal is kept as
``<size, 12 digits>-<witness key ID>.refused`` in the witness directory, a JSON
object: ``witness`` (its label), ``status``, ``message``, ``sent`` (our note) and
``held`` (the witness's). Nothing in it is trusted as it stands: the reader opens
``held`` with the log's own key, which a witness does not have, so a refusal can
show only what the log itself signed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overt.errors import LedgerError, LedgerIntegrityError

SUFFIX = ".refused"


class Refused(LedgerIntegrityError):
    """A witness refused a checkpoint and named the one it holds instead."""

    def __init__(self, message: str, witness: str, status: int, held: str) -> None:
        super().__init__(message)
        self.witness, self.status, self.held = witness, status, held


@dataclass(frozen=True, slots=True)
class Refusal:
    """One kept refusal, as read back (unchecked)."""

    path: Path
    witness: str
    status: int
    message: str
    sent: str
    held: str


def keep_refusal(directory: Path, size: int, sent: str, refused: Refused) -> Path:
    """Write ``refused`` (of our checkpoint ``sent``, of ``size`` entries) into
    ``directory``; its path."""
    key_id = refused.witness.rsplit("+", 1)[-1]
    path = directory / f"{size:012d}-{key_id}{SUFFIX}"
    directory.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({
        "witness": refused.witness, "status": refused.status, "message": str(refused),
        "sent": sent, "held": refused.held}, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def read_refusals(directory: Path) -> list[Refusal]:
    """The refusals kept in ``directory``, by name; a file that is not one is skipped
    (it shows nothing until the log's key opens its ``held`` note).

    Raises:
        LedgerError: the directory cannot be read.
    """
    found: list[Refusal] = []
    try:
        paths = sorted(directory.glob("*" + SUFFIX))
    except OSError as exc:
        raise LedgerError(f"cannot read the witness directory {directory}: {exc}") from exc
    for path in paths:
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(data, dict) and all(isinstance(data.get(k), str) for k in
                                          ("witness", "message", "sent", "held")) \
                and isinstance(data.get("status"), int):
            found.append(Refusal(path, data["witness"], data["status"], data["message"],
                                 data["sent"], data["held"]))
    return found
