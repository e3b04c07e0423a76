"""What ``overt serve`` does between requests: a checkpoint every N entries or T
seconds, none for a quiet ledger (a clock the test moves; no sleeps)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from overt.errors import LedgerError
from overt.ledger.checkpointer import Checkpointer
from overt.ledger.checkpoints import CheckpointSettings
from tests.conftest import run
from tests.ledger.proofs_helpers import add_turns, make_signer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def checkpointer(ledger: Any, tmp_path: Path, **settings: Any) -> tuple[Checkpointer, Clock]:
    signer = make_signer(tmp_path)
    clock = Clock()
    config = CheckpointSettings(signer.settings.private_key, signer.settings.witness_dir,
                                **settings)
    return Checkpointer(ledger, signer.key, config, clock=clock), clock


def test_a_checkpoint_comes_after_every_n_entries(ledger: Any, tmp_path: Path) -> None:
    maker, _ = checkpointer(ledger, tmp_path, every_entries=30, every_seconds=3600)
    add_turns(ledger, 5)
    assert run(maker.tick()) is None
    add_turns(ledger, 5)
    made = run(maker.tick())
    assert made is not None and made.size == 30
    assert run(maker.tick()) is None  # its own entry is not a reason for another


def test_a_checkpoint_comes_after_t_seconds_if_anything_was_appended(
    ledger: Any, tmp_path: Path
) -> None:
    maker, clock = checkpointer(ledger, tmp_path, every_entries=10_000, every_seconds=60)
    add_turns(ledger, 1)
    assert run(maker.tick()) is None
    clock.now += 61
    made = run(maker.tick())
    assert made is not None and made.size == 3
    clock.now += 61
    assert run(maker.tick()) is None  # nothing new: no checkpoint


def test_a_new_process_starts_from_the_witness_newest_checkpoint(
    ledger: Any, tmp_path: Path
) -> None:
    first, clock = checkpointer(ledger, tmp_path, every_entries=3, every_seconds=3600)
    add_turns(ledger, 1)
    assert run(first.tick()) is not None
    again = Checkpointer(ledger, first.key, first.settings, clock=clock)
    assert run(again.tick()) is None


def test_a_checkpoint_that_cannot_be_made_raises_for_the_loop_to_log(
    ledger: Any, tmp_path: Path
) -> None:
    maker, _ = checkpointer(ledger, tmp_path, every_entries=1,
                            commands=((sys.executable, "-c", "raise SystemExit(3)"),))
    add_turns(ledger, 1)
    with pytest.raises(LedgerError, match="witnesses failed"):
        run(maker.tick())
