"""Ledgers with turns, keys and witness directories for the checkpoint and proof tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overt.events import LedgerPruned, RuntimeStarted
from overt.ledger import checkpoints, signing
from overt.ledger.checkpoints import Checkpoint, CheckpointSettings
from tests.conftest import run


def add_turns(ledger: Any, turns: int, entries_per_turn: int = 3, prefix: str = "t") -> None:
    """``turns`` turns of ``entries_per_turn`` entries each, one transaction a turn."""
    for i in range(turns):
        run(ledger.record([RuntimeStarted(turn_id=f"{prefix}{i}", session_id="s",
                                          overt_version="0", pid=i, host="h", model="m")
                           for _ in range(entries_per_turn)]))


@dataclass
class Signer:
    key: signing.PrivateKey
    public_path: Path
    private_path: Path
    settings: CheckpointSettings

    @property
    def public(self) -> signing.PublicKey:
        return self.key.public

    @property
    def witness(self) -> Path:
        return Path(self.settings.witness_dir)

    def checkpoint(self, ledger: Any, *, prune: LedgerPruned | None = None
                   ) -> tuple[Checkpoint, str]:
        found: tuple[Checkpoint, str] = run(checkpoints.make(ledger, self.key, self.settings,
                                                             prune=prune))
        return found

    def witnessed(self) -> list[Checkpoint]:
        return [c for _, c in checkpoints.read_witness_dir(self.witness, self.public)[0]]


def make_signer(tmp_path: Path) -> Signer:
    private, public = tmp_path / "keys" / "ledger.key", tmp_path / "keys" / "ledger.key.pub"
    key = signing.write_keys(private, public, "test-ledger")
    return Signer(key, public, private,
                  CheckpointSettings(str(private), str(tmp_path / "witness")))
