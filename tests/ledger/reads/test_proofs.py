"""What a prune and ``disown-seal`` read first, on both backends: the seals no prune
wrote, and the ledger's origin."""

from __future__ import annotations

from typing import Any

from overt.ledger import checkpoints
from overt.ledger.reads import proofs
from tests.conftest import run
from tests.ledger.reads.records import ended, started


def test_a_ledger_only_overt_wrote_has_no_forged_seal_and_the_origin_it_signs(
        ledger: Any) -> None:
    ledger.record_sync([started("t1", "s"), ended("t1", "s")])
    assert run(proofs.forged_seals(ledger)) == []
    checkpoint, _ = run(checkpoints.compute(ledger))
    assert run(proofs.origin(ledger)) == (checkpoint.origin, 0)
