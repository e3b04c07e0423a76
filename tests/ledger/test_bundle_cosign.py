"""Witness cosignatures in evidence bundles, on both backends: ``export --bundle``
carries those kept beside its checkpoint, and ``check-bundle`` and the standalone
verifier check every one against the witness key it names, and hold the bundle to a
quorum of keys the checker trusts (``--witness-key``, ``--quorum``). Every forgery
here is refused by both."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.ledger import bundle
from overt.ledger.checkpoints import Checkpoint
from overt.ledger.signing import read_public
from overt.witness.client import cosignatures_path
from overt.witness.notes import WitnessSigner
from tests import needs
from tests.ledger.bundle_helpers import VERIFIER, Operator, flipped, load, one_turn, session
from tests.ledger.bundle_helpers import standalone_many as _many

needs.module("cryptography")


class Witnesses:
    """Three witness keys the operator's config lists, cosigning by hand (the protocol
    between a log and its witnesses is tested in tests/witness)."""

    def __init__(self, op: Operator, names: tuple[str, ...] = ("w1.example", "w2.example",
                                                              "w3.example")) -> None:
        self.op = op
        self.signers = [WitnessSigner.generate(n) for n in names]
        with op.config.open("a", encoding="utf-8") as f:
            for s in self.signers:  # nothing listens there: the checkpoint goes on without
                f.write(f'[[checkpoints.witnesses]]\nurl = "http://127.0.0.1:9"\n'
                        f'vkey = "{s.public.encode()}"\n')

    def vkeys(self, *which: int) -> list[str]:
        return [self.signers[i].public.encode() for i in which]

    def checkpoint(self) -> tuple[Checkpoint, str]:
        code, out, err = self.op("ledger", "checkpoint")
        assert code == 0, err
        size = int(out.splitlines()[1])
        note = (self.op.witness / f"{size:012d}.checkpoint").read_text(encoding="utf-8")
        return Checkpoint.open(note, read_public(self.op.public)), note

    def cosign(self, checkpoint: Checkpoint, *which: int) -> None:
        lines = [self.signers[i].cosign(checkpoint.text(), 1_800_000_000 + i) for i in which]
        cosignatures_path(self.op.witness, checkpoint.size).write_text("".join(lines),
                                                                      encoding="utf-8")


@pytest.fixture
def op(ledger: Any, ledger_url: str, tmp_path: Path,
       capsys: pytest.CaptureFixture[str]) -> Operator:
    return Operator(ledger_url, tmp_path, capsys)


def check_both(op: Operator, path: Path, *flags: str) -> tuple[int, str, str]:
    """``overt check-bundle`` and the standalone verifier, with the same flags, which
    must agree; (exit code, overt's output, the verifier's)."""
    code, out, _ = op("check-bundle", str(path), "--key", str(op.public), *flags)
    alone = subprocess.run([sys.executable, "-I", str(VERIFIER), str(path), "--key",
                            str(op.public), *flags], capture_output=True, text=True,
                           timeout=60)
    assert alone.returncode == code, (out, alone.stdout, alone.stderr)
    assert "Traceback" not in out + alone.stderr
    return code, out, alone.stdout


def quorum(w: Witnesses, needed: int, *which: int) -> list[str]:
    return [*(a for k in w.vkeys(*which) for a in ("--witness-key", k)), "--quorum",
            str(needed)]


def cosigned(op: Operator, ledger: Any, tmp: Path, *which: int,
             small: bool = False) -> tuple[Witnesses, Path, Checkpoint]:
    w = Witnesses(op)
    flags = ("--turn", one_turn(ledger)) if small else ("--session", session(ledger, tmp))
    checkpoint, _ = w.checkpoint()
    w.cosign(checkpoint, *which)
    return w, op.export("cosigned.json", *flags), checkpoint


def _write(path: Path, found: dict[str, Any]) -> Path:
    path.write_text(bundle.dump(found), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_bundle_carries_its_checkpoints_cosignatures_and_meets_a_quorum(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    w, path, _ = cosigned(op, ledger, tmp_path, 0, 1, 2)
    held = load(path)["cosignatures"]
    assert [c["witness"] for c in held] == sorted(w.vkeys(0, 1, 2))
    assert all(c["line"].startswith("\u2014 w") for c in held)
    code, out, alone = check_both(op, path)  # no policy: each still checked, and listed
    assert code == 0 and "cosigned by w1.example+" in out and "w3.example+" in alone
    code, out, alone = check_both(op, path, *quorum(w, 2, 0, 1, 2))
    assert code == 0 and "quorum 2 of 3 keys: met" in out and "quorum 2 of 3 keys: met" in alone


@pytest.mark.slow
def test_a_quorum_not_met_fails_both_and_says_who_is_missing(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    w, path, _ = cosigned(op, ledger, tmp_path, 0, 1)
    assert check_both(op, path, *quorum(w, 2, 0, 1, 2))[0] == 0
    code, out, alone = check_both(op, path, *quorum(w, 3, 0, 1, 2))
    assert code == 3 and "2 of the 3" in out and "missing: w3.example+" in out
    assert alone.startswith("INVALID: ") and "2 of the 3" in alone


@pytest.mark.slow
def test_cosignatures_stripped_from_a_bundle_fail_a_quorum(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    w, path, _ = cosigned(op, ledger, tmp_path, 0, 1, 2)
    stripped = load(path)
    stripped["cosignatures"] = []
    bare = _write(tmp_path / "stripped.json", stripped)
    assert check_both(op, bare)[0] == 0  # a bundle without witnesses is still a bundle
    code, out, alone = check_both(op, bare, *quorum(w, 1, 0, 1, 2))
    assert code == 3 and "0 of the 1" in out and "0 of the 1" in alone


def _forged_signature(line: str) -> str:
    dash, name, blob = line.split(" ")
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 0x01  # the signature's last byte: still a well-formed line
    return f"{dash} {name} {base64.b64encode(bytes(raw)).decode()}"


@pytest.mark.slow
def test_forged_cosignatures_fail_both_verifiers_with_or_without_a_policy(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    w, path, checkpoint = cosigned(op, ledger, tmp_path, 0, 1, 2)
    good = load(path)
    other = Checkpoint(checkpoint.origin, checkpoint.size + 1, checkpoint.root,
                       checkpoint.head, checkpoint.time, checkpoint.pruned)
    stranger = WitnessSigner.generate("w1.example")  # w1's name, another key

    def variant(name: str, change: Any) -> Path:
        found = json.loads(json.dumps(good))
        change(found["cosignatures"])
        found["cosignatures"].sort(key=lambda c: c["witness"])
        return _write(tmp_path / f"{name}.json", found)

    forged = [
        variant("signature", lambda cs: cs[0].update(line=_forged_signature(cs[0]["line"]))),
        # a real cosignature by w1, of another checkpoint
        variant("elsewhere", lambda cs: cs[0].update(
            line=w.signers[0].cosign(other.text(), 1_800_000_000).rstrip("\n"))),
        # w1's line under w2's key
        variant("swapped", lambda cs: cs[1].update(line=cs[0]["line"])),
        # one witness twice
        variant("twice", lambda cs: cs.append(dict(cs[0]))),
        variant("not-a-line", lambda cs: cs[0].update(line="hello")),
        variant("not-a-key", lambda cs: cs[0].update(witness="w1.example+00+AA==")),
        variant("extra-field", lambda cs: cs[0].update(note="x")),
    ]
    op.all_fail(forged)
    for path_ in forged:
        assert check_both(op, path_, *quorum(w, 1, 0, 1, 2))[0] == 3
    # w1's name, the forger's own key: a valid cosignature by somebody, never w1's
    rekeyed = variant("rekeyed", lambda cs: cs[0].update(
        witness=stranger.public.encode(),
        line=stranger.cosign(checkpoint.text(), 1_800_000_000).rstrip("\n")))
    assert check_both(op, rekeyed)[0] == 0
    code, out, alone = check_both(op, rekeyed, *quorum(w, 3, 0, 1, 2))
    assert code == 3 and "2 of the 3" in out and "missing: w1.example+" in alone


@pytest.mark.slow
def test_cosignatures_by_keys_outside_the_policy_do_not_count(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    w, path, _ = cosigned(op, ledger, tmp_path, 0, 1, 2)
    code, out, alone = check_both(op, path, *quorum(w, 2, 0, 1))
    assert code == 0
    outsider = WitnessSigner.generate("w9.example").public.encode()
    code, out, alone = check_both(op, path, "--witness-key", w.vkeys(0)[0],
                                  "--witness-key", outsider, "--quorum", "2")
    assert code == 3 and "1 of the 2" in out and "missing: w9.example+" in out + alone
    code, out, err = op("check-bundle", str(path), "--key", str(op.public), "--witness-key",
                        w.vkeys(0)[0], "--witness-key", w.vkeys(0)[0], "--quorum", "2")
    assert code == 2 and "distinct witness keys" in out + err


@pytest.mark.slow
def test_every_byte_of_a_small_cosigned_bundle_flipped_fails_both_verifiers(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    _, path, _ = cosigned(op, ledger, tmp_path, 0, small=True)
    assert check_both(op, path)[0] == 0
    start = path.read_bytes().index(b'"cosignatures":[{')
    paths = flipped(path, tmp_path / "flips")
    op.all_fail(paths)
    assert start > 0 and len(_many(paths[start:start + 2], op.public)) == 2
