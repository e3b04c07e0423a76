"""Three ``overt witness serve`` processes behind ``overt ledger checkpoint`` and
``verify --checkpoints --witness-key … --quorum N``: one killed mid-run, a forked
log and a rolled-back log."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.cli.main import main
from overt.ledger import checkpoints, open_ledger, signing
from overt.witness.client import read_cosignatures
from tests import needs
from tests.conftest import run
from tests.ledger.proofs_helpers import add_turns
from tests.witness.processes import Witness, overt, post, start_witness

needs.module("cryptography")


def _config(path: Path, private: Path, witness_dir: Path, witnesses: list[Witness]) -> Path:
    lines = ["[checkpoints]", f'private_key = "{private}"', f'witness_dir = "{witness_dir}"']
    for w in witnesses:
        lines += ["[[checkpoints.witnesses]]", f'url = "{w.url}"', f'vkey = "{w.vkey}"']
    path.write_text("\n".join(lines) + "\n")
    return path


class Log:
    def __init__(self, tmp: Path, url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp, self.url, self.capsys = tmp, url, capsys
        self.private, self.public = tmp / "log.key", tmp / "log.key.pub"
        self.key = signing.write_keys(self.private, self.public, "test-log")

    def cli(self, config: Path, *argv: str, db: str | None = None) -> tuple[int, str]:
        self.capsys.readouterr()
        code = main(["--config", str(config), "--db", db or self.url, "ledger", *argv])
        out, err = self.capsys.readouterr()
        return code, out + err


def _verify(log: Log, config: Path, witnesses: list[Witness], quorum: int,
            db: str | None = None) -> tuple[int, str]:
    keys = [a for w in witnesses for a in ("--witness-key", w.vkey)]
    return log.cli(config, "verify", "--checkpoints", str(log.tmp / "witness"), "--key",
                   str(log.public), *keys, "--quorum", str(quorum), db=db)


@pytest.fixture
def three(ledger: Any, ledger_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    add_turns(ledger, 10)
    log = Log(tmp_path, ledger_url, capsys)
    origin = run(checkpoints.compute(ledger))[0].origin
    witnesses = [start_witness(tmp_path / f"w{i}", f"w{i}.example", [(origin, log.public)])
                 for i in (1, 2, 3)]
    config = _config(tmp_path / "overt.toml", log.private, tmp_path / "witness", witnesses)
    yield log, witnesses, config
    for w in witnesses:
        if w.process.poll() is None:
            w.stop()


@pytest.mark.slow
def test_with_one_witness_killed_mid_run_a_quorum_of_two_still_holds(ledger, three, caplog):
    log, witnesses, config = three
    assert log.cli(config, "checkpoint")[0] == 0
    assert len(read_cosignatures(log.tmp / "witness", 30)) == 3
    assert _verify(log, config, witnesses, 3)[0] == 0
    witnesses[2].stop()
    add_turns(ledger, 5, prefix="u")
    code, out = log.cli(config, "checkpoint")
    assert code == 0  # the checkpoint is made and kept; the dead witness is logged
    assert "w3.example" in caplog.text and "did not cosign" in caplog.text
    add_turns(ledger, 7, prefix="v")
    code, note = log.cli(config, "checkpoint")  # from the last size, with a proof
    assert code == 0
    assert len(read_cosignatures(log.tmp / "witness", int(note.splitlines()[1]))) == 2
    assert _verify(log, config, witnesses, 2)[0] == 0
    code, out = _verify(log, config, witnesses, 3)
    assert code == 3
    assert "2 of the 3" in out and "missing: " + "+".join(witnesses[2].vkey.split("+")[:2]) in out


@pytest.mark.slow
def test_cosignatures_by_keys_not_in_the_policy_do_not_count(ledger, three):
    log, witnesses, config = three
    assert log.cli(config, "checkpoint")[0] == 0  # w1, w2 and w3 all cosign
    listed = [witnesses[0], Witness(witnesses[1].process, "", _stranger(), Path())]
    code, out = _verify(log, config, listed, 2)
    assert code == 3 and "1 of the 2" in out and "missing: w9.example+" in out


def _stranger() -> str:
    from overt.witness.notes import WitnessSigner
    return WitnessSigner.generate("w9.example").public.encode()


@pytest.mark.slow
def test_one_key_listed_twice_counts_once(ledger, three):
    log, witnesses, config = three
    assert log.cli(config, "checkpoint")[0] == 0
    code, out = _verify(log, config, [witnesses[0], witnesses[0]], 2)
    assert code == 2 and "needs as many distinct witness keys" in out


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_forked_log_is_refused_and_the_witness_reports_both_checkpoints(
        ledger, ledger_url, three, tmp_path):
    log, witnesses, config = three
    assert log.cli(config, "checkpoint")[0] == 0
    fork_db = tmp_path / "fork.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(ledger_url + suffix).exists():
            shutil.copy(ledger_url + suffix, str(fork_db) + suffix)
    forked_ledger = open_ledger(str(fork_db))
    add_turns(forked_ledger, 4, prefix="forked")
    forked_ledger.close_sync()
    fork_dir = tmp_path / "fork-witness"
    shutil.copytree(log.tmp / "witness", fork_dir)
    fork_config = _config(tmp_path / "fork.toml", log.private, fork_dir, witnesses)
    add_turns(ledger, 4, prefix="honest")
    assert log.cli(config, "checkpoint")[0] == 0
    code, out = log.cli(fork_config, "checkpoint", db=str(fork_db))
    assert code == 0, out  # the fork's operator gets a note, but no cosignature
    size = int(out.splitlines()[1])
    assert read_cosignatures(fork_dir, size) == []
    shown = overt("witness", "evidence", "--state", str(witnesses[0].state), cwd=tmp_path)
    assert shown.returncode == 3 and "== fork of overt/ledger/" in shown.stdout
    honest = (log.tmp / "witness" / f"{size:012d}.checkpoint").read_text()
    forked = (fork_dir / f"{size:012d}.checkpoint").read_text()
    assert honest != forked and honest in shown.stdout and forked in shown.stdout
    # the fork's own verify reports it, with both checkpoints, from what the witnesses
    # answered when they refused
    code, out = log.cli(fork_config, "verify", "--checkpoints", str(fork_dir), "--key",
                        str(log.public), db=str(fork_db))
    assert code == 3 and "a fork: witnesses " in out, out
    assert all(f"w{i}.example+" in out for i in (1, 2, 3))
    assert out.count(honest) == 1 and out.count(forked) == 1  # the pair once, every witness
    code, out = log.cli(config, "verify", "--checkpoints", str(log.tmp / "witness"), "--key",
                        str(log.public))
    assert code == 0, out  # the honest ledger is the one the witnesses hold


@pytest.mark.slow
def test_a_rolled_back_log_is_refused(ledger, three, tmp_path):
    log, witnesses, config = three
    assert log.cli(config, "checkpoint")[0] == 0
    add_turns(ledger, 4, prefix="more")
    code, newer = log.cli(config, "checkpoint")
    assert code == 0
    old_note = (log.tmp / "witness" / "000000000030.checkpoint").read_text()
    held = newer.splitlines()[1]
    status, _, reply = post(witnesses[0].url, f"old {held}\n\n{old_note}".encode())
    assert status == 400 and "rollback" in reply
    shown = overt("witness", "evidence", "--state", str(witnesses[0].state), cwd=tmp_path)
    assert "== rollback of" in shown.stdout and old_note in shown.stdout


@pytest.mark.slow
def test_a_log_rolled_back_and_signed_again_is_refused_and_verify_reports_it(
        ledger, raw, three):
    log, witnesses, config = three
    directory = log.tmp / "witness"
    assert log.cli(config, "checkpoint")[0] == 0  # 30 entries, then its record
    add_turns(ledger, 4, prefix="more")
    code, newer = log.cli(config, "checkpoint")
    assert code == 0
    held = int(newer.splitlines()[1])
    honest = (directory / f"{held:012d}.checkpoint").read_text()
    # the operator cuts the tail, hides the newer checkpoint, writes on and signs again
    raw.drop_guards()
    raw.execute("DELETE FROM audit_log WHERE seq > 31")
    for name in (f"{held:012d}.checkpoint", f"{held:012d}.cosignatures"):
        (directory / name).unlink()
    add_turns(ledger, 1, prefix="rewritten")
    code, out = log.cli(config, "checkpoint")
    assert code == 0, out  # signed, and refused by every witness, each saying why
    size = int(out.splitlines()[1])
    assert size < held and read_cosignatures(directory, size) == []
    code, out = _verify(log, config, witnesses, 2)
    assert code == 3 and "rolled back: witnesses " in out, out
    assert all(f"w{i}.example+" in out for i in (1, 2, 3))
    assert honest in out
    assert "0 of the 2" in out  # and the newest checkpoint has no cosignature


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("regrown", "kind"), [(2, "rolled back"), (7, "a fork")])
def test_a_truncated_log_signed_again_is_caught_through_the_witnesses_and_by_verify(
        ledger, ledger_url, three, tmp_path, regrown, kind):
    """The ledger and its witness directory put back to a copy, more turns added and a
    checkpoint signed: below the cosigned size it is a rollback, beyond it a tree that
    does not extend the cosigned one; every witness refuses, and verify on the
    truncated ledger names the conflict with both checkpoints (written on branch
    h-bundle3 against its own implementation, run here against main's)."""
    log, witnesses, config = three
    assert log.cli(config, "checkpoint")[0] == 0  # 30 entries, then its own entry
    old_db, old_dir = tmp_path / "old.db", tmp_path / "old-witness"
    for suffix in ("", "-wal", "-shm"):
        if Path(ledger_url + suffix).exists():
            shutil.copy(ledger_url + suffix, str(old_db) + suffix)
    shutil.copytree(log.tmp / "witness", old_dir)
    add_turns(ledger, 4, prefix="honest")
    code, honest = log.cli(config, "checkpoint")  # 43 entries, cosigned by all three
    assert code == 0 and honest.splitlines()[1] == "43"
    old_ledger = open_ledger(str(old_db))
    add_turns(old_ledger, regrown, prefix="again")
    old_ledger.close_sync()
    old_config = _config(tmp_path / "old.toml", log.private, old_dir, witnesses)
    code, again = log.cli(old_config, "checkpoint", db=str(old_db))
    size = int(again.splitlines()[1])
    assert size == 31 + 3 * regrown
    assert read_cosignatures(old_dir, size) == []  # no witness cosigned it
    code, out = log.cli(old_config, "verify", "--checkpoints", str(old_dir), "--key",
                        str(log.public), db=str(old_db))
    assert code == 3 and f"{kind}: witnesses " in out, out
    assert all(f"w{i}.example+" in out for i in (1, 2, 3))
    held = (log.tmp / "witness" / "000000000043.checkpoint").read_text()
    refused = (old_dir / f"{size:012d}.checkpoint").read_text()
    assert out.count(held) == 1 and out.count(refused) == 1


@pytest.mark.slow
def test_a_bundle_carries_the_witnesses_cosignatures_and_is_held_to_their_quorum(
        ledger, three, tmp_path):
    from tests.ledger.bundle_helpers import VERIFIER, one_turn

    log, witnesses, config = three
    turn = one_turn(ledger)
    assert log.cli(config, "checkpoint")[0] == 0  # all three cosign
    witnesses[2].stop()
    path = tmp_path / "turn.json"
    log.capsys.readouterr()
    assert main(["--config", str(config), "--db", log.url, "export", "--bundle", str(path),
                 "--turn", turn]) == 0
    keys = [a for w in witnesses for a in ("--witness-key", w.vkey)]
    for quorum, expected in (("3", 0), ("2", 0)):
        log.capsys.readouterr()
        code = main(["check-bundle", str(path), "--key", str(log.public), *keys,
                     "--quorum", quorum])
        out = log.capsys.readouterr().out
        assert code == expected and "quorum " + quorum + " of 3 keys: met" in out
        alone = subprocess.run([sys.executable, "-I", str(VERIFIER), str(path), "--key",
                                str(log.public), *keys, "--quorum", quorum],
                               capture_output=True, text=True, timeout=60)
        assert alone.returncode == expected and "w3.example+" in alone.stdout
    later = one_turn(ledger, "again")  # signed while w3 is down: two cosignatures
    assert log.cli(config, "checkpoint")[0] == 0
    assert main(["--config", str(config), "--db", log.url, "export", "--bundle", str(path),
                 "--turn", later]) == 0
    log.capsys.readouterr()
    assert main(["check-bundle", str(path), "--key", str(log.public), *keys]) == 3
    assert "2 of the 3" in log.capsys.readouterr().out
    alone = subprocess.run([sys.executable, "-I", str(VERIFIER), str(path), "--key",
                            str(log.public), *keys, "--quorum", "2"],
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and "quorum 2 of 3 keys: met" in alone.stdout
