"""``overt ledger keygen | checkpoint | prove | check-proof | consistency`` and
``verify --checkpoints``, as an operator and an auditor run them, on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overt.cli.main import main
from tests.ledger.proofs_helpers import add_turns


class Operator:
    def __init__(self, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.url, self.tmp, self.capsys = url, tmp_path, capsys
        self.private, self.public = tmp_path / "k", tmp_path / "k.pub"
        self.witness = tmp_path / "witness"

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(["--db", self.url, "ledger", *argv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def keygen(self) -> None:
        assert self("keygen", "--private", str(self.private), "--public",
                    str(self.public))[0] == 0

    def checkpoint(self) -> str:
        code, out, _ = self("checkpoint", "--key", str(self.private), "--witness-dir",
                            str(self.witness))
        assert code == 0
        return out


@pytest.fixture
def op(ledger: Any, ledger_url: str, tmp_path: Path,
       capsys: pytest.CaptureFixture[str]) -> Operator:
    add_turns(ledger, 40)
    operator = Operator(ledger_url, tmp_path, capsys)
    operator.keygen()
    return operator


@pytest.mark.slow
def test_checkpoint_prints_the_signed_note_it_wrote_to_the_witness(op: Operator) -> None:
    note = op.checkpoint()
    assert note.splitlines()[1] == "120"
    assert (op.witness / "000000000120.checkpoint").read_text() == note


@pytest.mark.slow
def test_prove_writes_a_proof_that_check_proof_accepts_offline(op: Operator) -> None:
    op.checkpoint()
    code, proof, _ = op("prove", "t5", "--checkpoints", str(op.witness), "--key",
                        str(op.public))
    assert code == 0
    path = op.tmp / "proof.json"
    path.write_text(proof)
    code, out, _ = op("check-proof", str(path), "--key", str(op.public))
    assert code == 0 and "ok: the whole turn t5, 3 entries (still in progress" in out
    path.write_text(proof.replace('"t5"', '"t6"', 1))
    code, out, _ = op("check-proof", str(path), "--key", str(op.public))
    assert code == 3 and out.startswith("FAILED")


@pytest.mark.slow
def test_consistency_proves_a_later_checkpoint_extends_an_earlier_one(
    op: Operator, ledger: Any
) -> None:
    op.checkpoint()
    add_turns(ledger, 10, prefix="more")
    op.checkpoint()
    old, new = sorted(op.witness.glob("*.checkpoint"))
    code, proof, _ = op("consistency", str(old), str(new), "--key", str(op.public))
    assert code == 0 and json.loads(proof)["format"] == "overt-consistency-proof/1"
    path = op.tmp / "consistency.json"
    path.write_text(proof)
    code, out, _ = op("check-proof", str(path), "--key", str(op.public))
    assert code == 0 and "extends the one of 120" in out


def test_verify_with_checkpoints_says_ok_and_how_many(op: Operator) -> None:
    op.checkpoint()
    code, out, _ = op("verify", "--checkpoints", str(op.witness), "--key", str(op.public))
    assert code == 0 and "ok: against 1 signed checkpoints, the newest of 120 entries" in out


def test_verify_with_an_empty_witness_directory_fails(op: Operator) -> None:
    op.witness.mkdir()
    code, out, _ = op("verify", "--checkpoints", str(op.witness), "--key", str(op.public))
    assert code == 3 and "no signed checkpoint" in out


def test_checkpoint_without_a_key_is_a_usage_error(op: Operator) -> None:
    code, _, err = op("checkpoint", "--key", str(op.tmp / "missing"), "--witness-dir",
                      str(op.witness))
    assert code == 2 and "overt ledger keygen" in err


def test_prove_of_an_unknown_turn_exits_4(op: Operator) -> None:
    op.checkpoint()
    code, _, err = op("prove", "nope", "--checkpoints", str(op.witness), "--key",
                      str(op.public))
    assert code == 4 and "no turn" in err


def test_verify_fails_on_a_checkpoint_of_the_key_altered_after_signing(
    op: Operator, ledger: Any
) -> None:
    # it was "not signed by the key, ignored" and exit 0 on the older ones: the newest
    # checkpoint edited (or its signature forged) hid whatever it would have caught
    op.checkpoint()
    add_turns(ledger, 10, prefix="more")
    op.checkpoint()
    newest = sorted(op.witness.glob("*.checkpoint"))[-1]
    lines = newest.read_text().split("\n")
    lines[1] = "120"
    newest.write_text("\n".join(lines))
    code, out, _ = op("verify", "--checkpoints", str(op.witness), "--key", str(op.public))
    assert code == 3 and "altered or forged" in out and newest.name in out


def test_verify_still_passes_over_a_checkpoint_another_key_signed(op: Operator) -> None:
    op.checkpoint()
    other = op.tmp / "other"
    assert op("keygen", "--name", "elsewhere", "--private", str(other))[0] == 0
    code, _, _ = op("checkpoint", "--key", str(other), "--witness-dir", str(op.tmp / "w2"))
    assert code == 0
    [foreign] = (op.tmp / "w2").glob("*.checkpoint")
    (op.witness / "000000000999.checkpoint").write_text(foreign.read_text())
    code, out, _ = op("verify", "--checkpoints", str(op.witness), "--key", str(op.public))
    assert code == 0 and "ignored: " in out
