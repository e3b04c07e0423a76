"""A ledger, checkpoints and proofs made before issue 33 (``fixtures/proofs-v1``, the
first proof format): its checkpoints still verify and take new ones on top; its proofs
still check, a turn's labelled as a proof of those entries only, with what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from overt.cli.main import main
from overt.ledger import proofs, signing

FIXTURE = Path(__file__).parent / "fixtures" / "proofs-v1"


@pytest.fixture
def old(tmp_path: Path) -> Path:
    copy = tmp_path / "proofs-v1"
    shutil.copytree(FIXTURE, copy)
    (copy / "test-only.key").chmod(0o600)
    return copy


def verify(old: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--db", str(old / "ledger.db"), "ledger", "verify", "--checkpoints",
                 str(old / "witness"), "--key", str(old / "test-only.key.pub")])
    return code, capsys.readouterr().out


def test_checkpoints_made_before_still_verify_and_take_new_ones(
    old: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = verify(old, capsys)
    assert code == 0, out
    assert "ok: against 3 signed checkpoints" in out
    assert main(["--db", str(old / "ledger.db"), "ledger", "checkpoint", "--key",
                 str(old / "test-only.key"), "--witness-dir", str(old / "witness")]) == 0
    code, out = verify(old, capsys)
    assert code == 0 and "ok: against 4 signed checkpoints" in out, out


def test_a_turns_proof_made_before_checks_as_a_proof_of_its_entries_only(
    old: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = (old / "turn-proof.json").read_bytes()
    key = signing.read_public(old / "test-only.key.pub")
    checked = proofs.check(data, key)
    assert (checked.format, checked.scope, checked.entries) == (
        proofs.INCLUSION_V1, proofs.ENTRIES, 8)
    capsys.readouterr()
    assert main(["ledger", "check-proof", str(old / "turn-proof.json"), "--key",
                 str(old / "test-only.key.pub")]) == 0
    out = capsys.readouterr().out
    turn = json.loads(data)["turn_id"]
    assert "ok, these entries only" in out and "cannot show none was left out" in out
    assert f"overt ledger prove {turn}" in out  # what to do
    # and a proof made now, from the same ledger, is of the whole turn
    assert main(["--db", str(old / "ledger.db"), "ledger", "prove", turn, "--checkpoints",
                 str(old / "witness"), "--key", str(old / "test-only.key.pub")]) == 0
    (old / "new-proof.json").write_text(capsys.readouterr().out)
    assert main(["ledger", "check-proof", str(old / "new-proof.json"), "--key",
                 str(old / "test-only.key.pub")]) == 0
    assert f"ok: the whole turn {turn}, 8 entries (completed at entry" in capsys.readouterr().out


def test_an_old_turn_proof_with_an_entry_left_out_says_what_it_is_not(
    old: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.ledger.test_tamper import drop_entry

    proof = drop_entry(json.loads((old / "turn-proof.json").read_text()), "turn.completed")
    (old / "bent.json").write_text(proofs.dump(proof))
    capsys.readouterr()
    assert main(["ledger", "check-proof", str(old / "bent.json"), "--key",
                 str(old / "test-only.key.pub")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok, these entries only: 7 entries")  # never "the whole turn"


def test_a_consistency_proof_made_before_still_checks(
    old: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "check-proof", str(old / "consistency-proof.json"), "--key",
                 str(old / "test-only.key.pub")]) == 0
    assert "extends the one of 29" in capsys.readouterr().out
