"""Ed25519 keys in their files and signed notes (C2SP signed-note)."""

from __future__ import annotations

import base64
import hashlib
import stat
from pathlib import Path

import pytest

from overt.errors import LedgerIntegrityError, UsageError
from overt.ledger import signing


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(
    tmp_path: Path
) -> None:
    key = signing.write_keys(tmp_path / "k", tmp_path / "k.pub", "ops-ledger")
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600
    assert signing.read_private(tmp_path / "k") == key
    assert signing.read_public(tmp_path / "k.pub") == key.public
    with pytest.raises(UsageError, match="never overwrites"):
        signing.write_keys(tmp_path / "k", tmp_path / "other.pub", "ops-ledger")


def test_a_private_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    signing.write_keys(tmp_path / "k", tmp_path / "k.pub", "x")
    (tmp_path / "k").chmod(0o644)
    with pytest.raises(UsageError, match="readable by others"):
        signing.read_private(tmp_path / "k")


def test_the_key_hash_is_the_signed_note_one() -> None:
    public = bytes(range(32))
    expected = hashlib.sha256(b"name\n\x01" + public).digest()[:4]
    key = signing.PublicKey("name", public)
    assert key.hash == expected
    assert key.encode() == f"name+{expected.hex()}+" + base64.b64encode(b"\x01" + public).decode()
    assert signing.PublicKey.parse(key.encode()) == key


def test_a_verifier_key_whose_hash_does_not_match_is_refused() -> None:
    key = signing.PublicKey("name", bytes(32))
    name, _, rest = key.encode().split("+")
    with pytest.raises(UsageError, match="hash does not match"):
        signing.PublicKey.parse(f"{name}+00000000+{rest}")


def test_a_signed_note_opens_with_its_key_and_with_no_other(tmp_path: Path) -> None:
    key = signing.PrivateKey.generate("a")
    other = signing.PrivateKey.generate("a")
    note = signing.sign_note("origin\n1\nroot\n", key)
    assert note.startswith("origin\n1\nroot\n\n\u2014 a ")
    assert signing.open_note(note, key.public) == "origin\n1\nroot\n"
    with pytest.raises(LedgerIntegrityError, match="not signed by"):
        signing.open_note(note, other.public)
    with pytest.raises(LedgerIntegrityError, match="does not verify"):
        signing.open_note(note.replace("root", "roor"), key.public)


def test_a_key_name_with_a_space_or_a_plus_is_refused() -> None:
    for name in ("a b", "a+b", ""):
        with pytest.raises(UsageError):
            signing.PrivateKey.generate(name)


def test_without_the_proofs_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from overt.errors import ExtraMissingError

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric", None)
    with pytest.raises(ExtraMissingError, match=r"overt\[proofs\]"):
        signing.PrivateKey.generate("x").sign(b"m")
    with pytest.raises(ExtraMissingError, match=r"overt\[proofs\]"):
        signing.PublicKey("x", bytes(32)).verify(b"m", bytes(64))
