"""``overt witness serve`` answers add-checkpoint over HTTP in its own process."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from overt.ledger import merkle
from overt.ledger.signing import PrivateKey, sign_note, write_keys
from overt.witness.notes import WitnessKey, verify_cosignature
from tests import needs
from tests.witness.processes import overt, post, start_witness

needs.module("cryptography")

ORIGIN = "log.example/serve"


def _body(size: int, leaves: list[bytes]) -> str:
    root = merkle.root(merkle.perfect_over(leaves), size)
    return f"{ORIGIN}\n{size}\n{base64.b64encode(root).decode()}\n"


def _request(old: int, proof: list[bytes], note: str) -> bytes:
    lines = [f"old {old}"] + [base64.b64encode(p).decode() for p in proof]
    return ("\n".join(lines) + "\n\n" + note).encode()


@pytest.mark.slow
def test_a_witness_process_cosigns_refuses_and_reports_the_evidence(tmp_path: Path):
    log: PrivateKey = write_keys(tmp_path / "log.key", tmp_path / "log.pub", "log.example")
    witness = start_witness(tmp_path / "w1", "w1.example", [(ORIGIN, tmp_path / "log.pub")])
    try:
        leaves = [merkle.leaf_hash(bytes([i])) for i in range(30)]
        body = _body(10, leaves)
        status, _, line = post(witness.url, _request(0, [], sign_note(body, log)))
        assert status == 200
        verify_cosignature(body, line, WitnessKey.parse(witness.vkey))
        status, ctype, size = post(witness.url, _request(4, [], sign_note(body, log)))
        assert (status, ctype, size) == (409, "text/x.tlog.size", "10\n")
        forked = [merkle.leaf_hash(b"f" + bytes([i])) for i in range(30)]
        status, _, _ = post(witness.url, _request(10, [], sign_note(_body(10, forked), log)))
        assert status == 422
        assert post(witness.url, b"nonsense")[0] == 400
    finally:
        witness.stop()
    shown = overt("witness", "evidence", "--state", str(witness.state), cwd=tmp_path)
    assert shown.returncode == 3
    assert "== fork of log.example/serve" in shown.stdout
    assert body in shown.stdout and _body(10, forked) in shown.stdout
