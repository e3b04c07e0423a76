"""Proofs an auditor checks offline: a turn's inclusion, one checkpoint extending
another; any changed byte of a proof fails it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overt.errors import LedgerIntegrityError, NotFoundError, UsageError
from overt.ledger import proofs, signing
from tests.conftest import run
from tests.ledger.proofs_helpers import add_turns, make_signer


def proof_of(ledger: Any, tmp_path: Path, turn: str = "t7") -> tuple[bytes, signing.PublicKey]:
    signer = make_signer(tmp_path)
    checkpoint, note = signer.checkpoint(ledger)
    proof = run(proofs.prove(ledger, turn, note, checkpoint, signer.public))
    return proofs.dump(proof).encode(), signer.public


@pytest.mark.slow
def test_a_turns_proof_checks_with_the_public_key_alone(ledger: Any, tmp_path: Path) -> None:
    add_turns(ledger, 400)
    data, key = proof_of(ledger, tmp_path, "t123")
    checked = proofs.check(data, key)
    assert (checked.turn_id, checked.entries, checked.size) == ("t123", 3, 1200)
    assert len(data) < 10_000


@pytest.mark.slow
def test_a_proof_fails_when_any_byte_of_it_changes(ledger: Any, tmp_path: Path) -> None:
    add_turns(ledger, 20, entries_per_turn=1)
    data, key = proof_of(ledger, tmp_path, "t7")
    proofs.check(data, key)
    for i in range(len(data)):
        for flip in (0x01, 0x20):
            bent = bytearray(data)
            bent[i] ^= flip
            with pytest.raises(LedgerIntegrityError):
                proofs.check(bytes(bent), key)


def test_a_proof_fails_with_another_key(ledger: Any, tmp_path: Path) -> None:
    add_turns(ledger, 10)
    data, _ = proof_of(ledger, tmp_path)
    other = signing.write_keys(tmp_path / "o", tmp_path / "o.pub", "test-ledger").public
    with pytest.raises(LedgerIntegrityError, match="names key"):
        proofs.check(data, other)


def test_a_proof_with_a_forged_entry_and_its_hash_recomputed_fails(
    ledger: Any, tmp_path: Path
) -> None:
    from overt.ledger.canonical import chain_hash, entry_payload

    add_turns(ledger, 10)
    data, key = proof_of(ledger, tmp_path)
    proof = json.loads(data)
    entry = proof["entries"][0]
    entry["data"] = entry["data"].replace('"pid":7', '"pid":8')
    entry["hash"] = chain_hash(entry["prev_hash"], entry_payload(
        entry["seq"], entry["id"], entry["kind"], entry["at"], entry["turn_id"],
        entry["session_id"], entry["data"]))
    with pytest.raises(LedgerIntegrityError):
        proofs.check(proofs.dump(proof).encode(), key)


def test_a_turn_newer_than_the_checkpoint_or_unknown_has_no_proof(
    ledger: Any, tmp_path: Path
) -> None:
    add_turns(ledger, 3)
    signer = make_signer(tmp_path)
    checkpoint, note = signer.checkpoint(ledger)
    add_turns(ledger, 1, prefix="late")
    with pytest.raises(UsageError, match="after the newest checkpoint"):
        run(proofs.prove(ledger, "late0", note, checkpoint, signer.public))
    with pytest.raises(NotFoundError):
        run(proofs.prove(ledger, "nope", note, checkpoint, signer.public))


def test_a_consistency_proof_shows_the_newer_checkpoint_extends_the_older(
    ledger: Any, tmp_path: Path
) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 111)
    old = signer.checkpoint(ledger)
    add_turns(ledger, 222)
    new = signer.checkpoint(ledger)
    proof = run(proofs.consistency(ledger, (old[1], old[0]), (new[1], new[0]), signer.public))
    data = proofs.dump(proof).encode()
    checked = proofs.check(data, signer.public)
    assert (checked.old_size, checked.size) == (old[0].size, new[0].size)
    bent = json.loads(data)
    bent["proof"] = bent["proof"][:-1]
    with pytest.raises(LedgerIntegrityError, match="does not extend"):
        proofs.check(proofs.dump(bent).encode(), signer.public)


def test_a_turn_in_progress_is_proved_as_such_and_one_entry_alone_is_labelled(
    ledger: Any, tmp_path: Path
) -> None:
    add_turns(ledger, 10)  # turns of three entries, none completed
    signer = make_signer(tmp_path)
    checkpoint, note = signer.checkpoint(ledger)
    proof = run(proofs.prove(ledger, "t4", note, checkpoint, signer.public))
    assert (proof["scope"], proof["turn_entries"], proof["completed_seq"]) == ("turn", 3, None)
    checked = proofs.check(proofs.dump(proof).encode(), signer.public)
    assert (checked.scope, checked.completed_seq, checked.entries) == ("turn", None, 3)
    one = run(proofs.prove_entry(ledger, 14, note, checkpoint, signer.public))
    checked = proofs.check(proofs.dump(one).encode(), signer.public)
    assert (checked.scope, checked.seq, checked.turn_id, checked.entries) == (
        "entry", 14, "t4", 1)
    bent = json.loads(proofs.dump(proof))
    bent["turn_entries"] = 4
    with pytest.raises(LedgerIntegrityError, match="entries of the turn are missing"):
        proofs.check(proofs.dump(bent).encode(), signer.public)
    with pytest.raises(NotFoundError):
        run(proofs.prove_entry(ledger, 999, note, checkpoint, signer.public))
