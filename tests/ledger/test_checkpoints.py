"""Signed checkpoints on both backends: what they say, their witnesses, and the ledger
checked against them (a cut tail, a re-computed chain, a forged prune)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from overt.clock import now_iso
from overt.errors import LedgerError, LedgerIntegrityError
from overt.events import LedgerCheckpointed
from overt.ledger import audit, checkpoints
from overt.ledger.checkpoints import Checkpoint, CheckpointSettings
from tests.backends import Raw
from tests.conftest import run
from tests.ledger.proofs_helpers import Signer, add_turns, make_signer


def verify(ledger: Any, signer: Signer) -> audit.CheckpointReport:
    chain = run(ledger.verify(check_bodies=False))
    report: audit.CheckpointReport = run(audit.verify_against(ledger, chain,
                                                              signer.witnessed()))
    return report


def test_a_checkpoint_signs_the_size_root_and_head_and_is_recorded_and_witnessed(
    ledger: Any, raw: Raw, tmp_path: Path
) -> None:
    add_turns(ledger, 10)
    signer = make_signer(tmp_path)
    checkpoint, note = signer.checkpoint(ledger)
    assert checkpoint.size == 30 and checkpoint.pruned == 0
    assert checkpoint.head == raw.query("SELECT hash FROM audit_log WHERE seq = 30")[0][0]
    assert Checkpoint.open(note, signer.public) == checkpoint
    assert (signer.witness / "000000000030.checkpoint").read_text() == note
    (entry,) = run(ledger.entries(kinds=["ledger.checkpoint"]))
    recorded = entry.event(LedgerCheckpointed)
    assert entry.seq == 31 and recorded.tree_size == 30
    assert recorded.witnesses == ["dir"] and recorded.key_id == signer.public.key_id


def test_the_checkpoint_text_has_one_written_form() -> None:
    cp = Checkpoint("overt/ledger/ab", 3, bytes(32), "sha256:" + "0" * 64, "t", 0)
    assert Checkpoint.parse(cp.text()) == cp
    for bent in (cp.text().replace("\n3\n", "\n03\n"), cp.text() + "extra\n",
                 cp.text().replace("head ", "head  ")):
        with pytest.raises(LedgerIntegrityError):
            Checkpoint.parse(bent)


def test_an_untouched_ledger_verifies_against_its_checkpoints(ledger: Any, tmp_path: Path
                                                              ) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 100)
    signer.checkpoint(ledger)
    add_turns(ledger, 100)
    signer.checkpoint(ledger)
    add_turns(ledger, 3)
    report = verify(ledger, signer)
    assert report.ok, report.problem
    assert report.checkpoints == report.checked == 2


def test_a_command_witness_gets_the_note_on_stdin(ledger: Any, tmp_path: Path) -> None:
    add_turns(ledger, 2)
    signer = make_signer(tmp_path)
    copy = tmp_path / "copy.txt"
    signer.settings = CheckpointSettings(
        signer.settings.private_key, signer.settings.witness_dir,
        commands=((sys.executable, "-c",
                   f"import sys; open({str(copy)!r}, 'w').write(sys.stdin.read())"),))
    _, note = signer.checkpoint(ledger)
    assert copy.read_text() == note
    (entry,) = run(ledger.entries(kinds=["ledger.checkpoint"]))
    assert entry.event(LedgerCheckpointed).witnesses == ["dir", "command"]


def test_a_failing_witness_fails_the_checkpoint_after_the_others_took_it(
    ledger: Any, tmp_path: Path
) -> None:
    add_turns(ledger, 2)
    signer = make_signer(tmp_path)
    signer.settings = CheckpointSettings(signer.settings.private_key,
                                         signer.settings.witness_dir,
                                         commands=((sys.executable, "-c", "raise SystemExit(1)"),))
    with pytest.raises(LedgerError, match="witnesses failed"):
        signer.checkpoint(ledger)
    assert len(signer.witnessed()) == 1


def test_a_checkpoint_refuses_a_ledger_that_does_not_extend_the_last_one(
    ledger: Any, raw: Raw, tmp_path: Path
) -> None:
    add_turns(ledger, 300)
    signer = make_signer(tmp_path)
    signer.checkpoint(ledger)
    raw.drop_guards()
    raw.execute("UPDATE audit_log SET hash = 'sha256:' || upper(substr(hash, 8)) WHERE seq = 5")
    raw.execute("DELETE FROM merkle_nodes")
    with pytest.raises(LedgerIntegrityError, match="not those the checkpoint"):
        signer.checkpoint(ledger)


def test_a_prune_not_signed_by_a_checkpoint_is_refused_and_a_signed_one_is_taken(
    ledger: Any, tmp_path: Path
) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 50)
    signer.checkpoint(ledger)
    record = run(ledger.prune(now_iso()))
    with pytest.raises(LedgerIntegrityError, match="a prune no checkpoint signed"):
        signer.checkpoint(ledger)
    assert not verify(ledger, signer).ok
    checkpoint, _ = signer.checkpoint(ledger, prune=record)
    assert checkpoint.pruned == 151  # 150 entries and the checkpoint's
    add_turns(ledger, 2, prefix="later")
    signer.checkpoint(ledger)
    report = verify(ledger, signer)
    assert report.ok, report.problem
    assert report.inside_pruned == 1


def test_checkpoints_of_two_ledgers_do_not_follow_each_other() -> None:
    a = Checkpoint("overt/ledger/aa", 3, bytes(32), "h", "t", 0)
    b = Checkpoint("overt/ledger/bb", 4, bytes(32), "h", "t", 0)
    with pytest.raises(LedgerIntegrityError, match="two ledgers"):
        checkpoints.check_successor(a, b)
    with pytest.raises(LedgerIntegrityError, match="goes back"):
        checkpoints.check_successor(a, Checkpoint(a.origin, 2, bytes(32), "h", "t", 0))


def test_a_file_in_the_witness_directory_the_key_did_not_sign_is_set_aside(
    ledger: Any, tmp_path: Path
) -> None:
    add_turns(ledger, 5)
    signer = make_signer(tmp_path)
    signer.checkpoint(ledger)
    (signer.witness / "999999999999.checkpoint").write_text("overt/ledger/x\n1\n\n")
    good, bad = checkpoints.read_witness_dir(signer.witness, signer.public)
    assert len(good) == 1 and [p.name for p, _ in bad] == ["999999999999.checkpoint"]
