"""add-checkpoint answers with the tlog-witness status codes and keeps evidence."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from overt.ledger import merkle
from overt.ledger.signing import PrivateKey, sign_note
from overt.witness.add import add_checkpoint
from overt.witness.notes import WitnessSigner, verify_cosignature
from overt.witness.state import WitnessState
from tests import needs

needs.module("cryptography")

ORIGIN = "log.example/test"
LOG = PrivateKey("log.example", b"\x05" * 32)
SIGNER = WitnessSigner("w1.example", b"\x06" * 32)
NOW = 1700000000


def _leaves(n: int, salt: bytes = b"") -> list[bytes]:
    return [merkle.leaf_hash(salt + i.to_bytes(4, "big")) for i in range(n)]


def _note(size: int, root: bytes, origin: str = ORIGIN, key: PrivateKey = LOG) -> str:
    return sign_note(f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n", key)


def _tree(leaves: list[bytes], size: int) -> bytes:
    return merkle.root(merkle.perfect_over(leaves), size)


def _request(old: int, proof: list[bytes], note: str) -> bytes:
    lines = [f"old {old}"] + [base64.b64encode(p).decode() for p in proof]
    return ("\n".join(lines) + "\n\n" + note).encode()


@pytest.fixture
def state(tmp_path: Path) -> WitnessState:
    s = WitnessState(tmp_path / "w.sqlite")
    yield s
    s.close()


def _add(state: WitnessState, body: bytes):
    return add_checkpoint(body, {ORIGIN: LOG.public}, SIGNER, state, NOW)


def test_a_first_checkpoint_then_a_consistent_one_are_cosigned(state):
    leaves = _leaves(20)
    first = _add(state, _request(0, [], _note(7, _tree(leaves, 7))))
    assert first.status == 200
    body = f"{ORIGIN}\n7\n{base64.b64encode(_tree(leaves, 7)).decode()}\n"
    assert verify_cosignature(body, first.body, SIGNER.public) == NOW
    proof = merkle.consistency_proof(merkle.perfect_over(leaves), 7, 20)
    second = _add(state, _request(7, proof, _note(20, _tree(leaves, 20))))
    assert second.status == 200


def test_a_stale_old_size_gets_409_with_the_held_size(state):
    leaves = _leaves(9)
    assert _add(state, _request(0, [], _note(9, _tree(leaves, 9)))).status == 200
    reply = _add(state, _request(3, [], _note(9, _tree(leaves, 9))))
    assert (reply.status, reply.content_type, reply.body) == (409, "text/x.tlog.size", "9\n")


def test_a_bad_log_signature_is_403_and_an_unknown_origin_404(state):
    leaves = _leaves(4)
    other = PrivateKey("log.example", b"\x07" * 32)
    assert _add(state, _request(0, [], _note(4, _tree(leaves, 4), key=other))).status == 403
    assert _add(state, _request(0, [], _note(4, _tree(leaves, 4), origin="x"))).status == 404


def test_malformed_requests_are_400(state):
    assert _add(state, b"old x\n\nfoo").status == 400
    assert _add(state, b"old 0\n").status == 400
    assert _add(state, b"old 0\nnot-base64!\n\n" + _note(1, b"\0" * 32).encode()).status == 400


def test_a_fork_is_refused_and_kept_as_evidence_beside_the_held_checkpoint(state):
    honest, forked = _leaves(10), _leaves(10, b"fork")
    held = _note(10, _tree(honest, 10))
    assert _add(state, _request(0, [], held)).status == 200
    fork = _note(10, _tree(forked, 10))
    assert _add(state, _request(10, [], fork)).status == 422
    [evidence] = state.evidence()
    assert (evidence.kind, evidence.held_note, evidence.refused_note) == ("fork", held, fork)


def test_a_forked_extension_fails_its_proof(state):
    honest, forked = _leaves(12), _leaves(12, b"fork")
    assert _add(state, _request(0, [], _note(5, _tree(honest, 5)))).status == 200
    proof = merkle.consistency_proof(merkle.perfect_over(forked), 5, 12)
    assert _add(state, _request(5, proof, _note(12, _tree(forked, 12)))).status == 422
    assert [e.kind for e in state.evidence()] == ["inconsistent"]


def test_a_rollback_is_refused_and_kept_as_evidence(state):
    leaves = _leaves(10)
    held = _note(10, _tree(leaves, 10))
    assert _add(state, _request(0, [], held)).status == 200
    reply = _add(state, _request(10, [], _note(6, _tree(leaves, 6))))
    assert reply.status == 400
    assert [e.kind for e in state.evidence()] == ["rollback"]
    assert state.latest(ORIGIN).size == 10
