"""A witness's refusal kept on the log's side counts only for what the log's own key
signed: on both backends, a refusal naming a checkpoint the ledger extends shows
nothing, one naming a checkpoint the log never signed is passed over, and a
checkpoint the ledger does not extend is a fork."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overt.ledger import audit, signing
from overt.ledger.checkpoints import Checkpoint
from overt.witness.refusals import Refused, keep_refusal, read_refusals
from tests import needs
from tests.conftest import run
from tests.ledger.proofs_helpers import add_turns, make_signer

needs.module("cryptography")


def _refuse(directory: Path, size: int, sent: str, held: str) -> None:
    keep_refusal(directory, size, sent,
                 Refused("refused (422)", "w1.example+0a0b0c0d", 422, held))


def test_a_refusal_the_ledger_extends_or_the_log_never_signed_shows_nothing(
        ledger: Any, tmp_path: Path) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 5)
    _, first = signer.checkpoint(ledger)
    add_turns(ledger, 5)
    checkpoint, second = signer.checkpoint(ledger)
    _refuse(signer.witness, 1, second, first)  # a bad proof: the ledger extends what it holds
    stranger = signing.write_keys(tmp_path / "s.key", tmp_path / "s.pub", "test-ledger")
    forged = signing.sign_note(Checkpoint(checkpoint.origin, checkpoint.size,
                                          bytes(32), checkpoint.head, checkpoint.time,
                                          0).text(), stranger)
    _refuse(signer.witness, 2, second, forged)  # a fork "shown" by a note the log never signed
    (signer.witness / "000000000003-junk.refused").write_text("{not json")
    assert len(read_refusals(signer.witness)) == 2
    assert run(audit.witness_conflicts(ledger, signer.witness, signer.public)) == []


def test_a_checkpoint_the_log_signed_that_the_ledger_does_not_extend_is_a_fork(
        ledger: Any, tmp_path: Path) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 5)
    checkpoint, note = signer.checkpoint(ledger)
    other = Checkpoint(checkpoint.origin, checkpoint.size, bytes(32), checkpoint.head,
                       checkpoint.time, 0)
    signed_other = signing.sign_note(other.text(), signer.key)  # the log signed two roots
    _refuse(signer.witness, 1, note, signed_other)
    later = Checkpoint(checkpoint.origin, checkpoint.size + 100, bytes(32), checkpoint.head,
                       checkpoint.time, 0)
    _refuse(signer.witness, 2, note, signing.sign_note(later.text(), signer.key))
    found = run(audit.witness_conflicts(ledger, signer.witness, signer.public))
    assert [c.what for c in found] == ["fork", "rollback"]
    assert found[0].held_note == signed_other and "a fork: witness w1.example+" in found[0].text()
