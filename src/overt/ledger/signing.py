"""Ed25519 keys and signed notes, as transparency logs write them (C2SP signed-note,
the format of Go's ``golang.org/x/mod/sumdb/note``).

Keys
    A key has a name (no spaces, no ``+``). Its *key hash* is the first 4 bytes of
    ``SHA-256(name || "\\n" || 0x01 || public key)``. The public key file holds the
    verifier key ``NAME+HASH+BASE64(0x01 || public key)``; the private key file
    ``PRIVATE+KEY+NAME+HASH+BASE64(0x01 || seed)``, mode 0600. ``overt ledger
    keygen`` writes both; neither is ever stored in the ledger.

A signed note
    The text (every line ending in a newline), a blank line, then one line per
    signature: ``— NAME BASE64(key hash || Ed25519 signature of the text)``.

Needs the ``cryptography`` package (``pip install 'overt[proofs]'``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overt.errors import ExtraMissingError, ForgedSignatureError, LedgerIntegrityError, UsageError

ALG_ED25519 = b"\x01"
DASH = "\u2014"


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise ExtraMissingError("proofs", "cryptography") from exc
    return ed25519


def key_hash(name: str, public: bytes) -> bytes:
    """The 4-byte hash naming a key in signature lines."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ALG_ED25519 + public).digest()[:4]


def _check_name(name: str) -> str:
    if not name or "+" in name or any(c.isspace() for c in name) or not name.isprintable():
        raise UsageError(f"a key name has no spaces and no '+': {name!r}")
    return name


@dataclass(frozen=True, slots=True)
class PublicKey:
    """A verifier: the name and raw 32-byte Ed25519 public key."""

    name: str
    public: bytes

    @property
    def hash(self) -> bytes:
        return key_hash(self.name, self.public)

    @property
    def key_id(self) -> str:
        """``NAME+HASH`` (hex), how proofs name the key that signed their checkpoint."""
        return f"{self.name}+{self.hash.hex()}"

    def encode(self) -> str:
        return f"{self.key_id}+{base64.b64encode(ALG_ED25519 + self.public).decode()}"

    @classmethod
    def parse(cls, text: str) -> PublicKey:
        """A verifier key (``NAME+HASH+BASE64``).

        Raises:
            UsageError: not a verifier key of an Ed25519 key.
        """
        parts = text.strip().split("+", 2)  # base64 may hold a '+'; a name never does
        if len(parts) != 3:
            raise UsageError("not a verifier key (NAME+HASH+BASE64)")
        name, hash_hex, encoded = parts
        raw = _b64(encoded, "verifier key")
        if len(raw) != 33 or raw[:1] != ALG_ED25519:
            raise UsageError("not an Ed25519 verifier key")
        key = cls(_check_name(name), raw[1:])
        if key.hash.hex() != hash_hex:
            raise UsageError("the verifier key's hash does not match its name and key")
        return key

    def verify(self, message: bytes, signature: bytes) -> bool:
        ed25519 = _ed25519()  # first: without the extra, its error names the extra
        from cryptography.exceptions import InvalidSignature

        try:
            ed25519.Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True, slots=True)
class PrivateKey:
    """A signer: the name and the 32-byte Ed25519 seed."""

    name: str
    seed: bytes

    @property
    def public(self) -> PublicKey:
        key = _ed25519().Ed25519PrivateKey.from_private_bytes(self.seed)
        from cryptography.hazmat.primitives import serialization

        raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
        return PublicKey(self.name, raw)

    def sign(self, message: bytes) -> bytes:
        return bytes(_ed25519().Ed25519PrivateKey.from_private_bytes(self.seed).sign(message))

    def encode(self) -> str:
        pub = self.public
        return (f"PRIVATE+KEY+{pub.key_id}+"
                f"{base64.b64encode(ALG_ED25519 + self.seed).decode()}")

    @classmethod
    def generate(cls, name: str) -> PrivateKey:
        return cls(_check_name(name), os.urandom(32))

    @classmethod
    def parse(cls, text: str) -> PrivateKey:
        """A signer key (``PRIVATE+KEY+NAME+HASH+BASE64``).

        Raises:
            UsageError: not a signer key of an Ed25519 key.
        """
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise UsageError("not a signer key (PRIVATE+KEY+NAME+HASH+BASE64)")
        raw = _b64(parts[4], "signer key")
        if len(raw) != 33 or raw[:1] != ALG_ED25519:
            raise UsageError("not an Ed25519 signer key")
        key = cls(_check_name(parts[2]), raw[1:])
        if key.public.hash.hex() != parts[3]:
            raise UsageError("the signer key's hash does not match its name and key")
        return key


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError(f"the {what} is not base64") from exc


def write_keys(private_path: Path, public_path: Path, name: str) -> PrivateKey:
    """Make a key pair: the private key at ``private_path`` (mode 0600, never
    overwritten), the verifier key at ``public_path``.

    Raises:
        UsageError: a file is already there.
    """
    key = PrivateKey.generate(name)
    write_key_files(private_path, public_path, key.encode(), key.public.encode())
    return key


def write_key_files(private_path: Path, public_path: Path, private: str, public: str) -> None:
    """Write a key pair's encoded halves: the private one at ``private_path`` (mode 0600),
    the public one at ``public_path``; neither file is ever overwritten.

    Raises:
        UsageError: a file is already there.
    """
    for path in (private_path, public_path):
        if path.exists():
            raise UsageError(f"{path} exists: keygen never overwrites a key")
    private_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(private + "\n")
    public_path.parent.mkdir(parents=True, exist_ok=True)
    public_path.write_text(public + "\n", encoding="ascii")


def read_private(path: Path) -> PrivateKey:
    """The signer key in ``path``.

    Raises:
        UsageError: missing, readable by others than its owner, or not a key.
    """
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the private key {path}: {exc}") from exc
    if mode & 0o077:
        raise UsageError(f"the private key {path} is readable by others: chmod 600 it")
    return PrivateKey.parse(text)


def read_public(path: Path) -> PublicKey:
    """The verifier key in ``path``.

    Raises:
        UsageError: missing or not a key.
    """
    try:
        return PublicKey.parse(path.read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the public key {path}: {exc}") from exc


def sign_note(text: str, key: PrivateKey) -> str:
    """``text`` (lines ending in newlines) as a note signed by ``key``."""
    if not text.endswith("\n") or "\n\n" in text:
        raise ValueError("a note's text is non-empty lines, each ending in a newline")
    signature = key.sign(text.encode("utf-8"))
    blob = base64.b64encode(key.public.hash + signature).decode()
    return f"{text}\n{DASH} {key.name} {blob}\n"


def open_note(note: str, key: PublicKey) -> str:
    """The text of ``note``, if ``key`` signed it.

    Raises:
        LedgerIntegrityError: the note is malformed or ``key``'s signature on it is
            missing or does not verify.
    """
    text, sep, signatures = note.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise LedgerIntegrityError("not a signed note (text, a blank line, signatures)")
    text += "\n"
    found = False
    for line in signatures[:-1].split("\n"):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != DASH:
            raise LedgerIntegrityError(f"not a signature line: {line[:80]!r}")
        if parts[1] != key.name:
            continue
        try:
            raw = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise LedgerIntegrityError("a signature is not base64") from exc
        if base64.b64encode(raw).decode() != parts[2]:  # unused bits set: another text
            raise LedgerIntegrityError("a signature is not in canonical base64")
        if raw[:4] != key.hash:
            continue
        if len(raw) != 68 or not key.verify(text.encode("utf-8"), raw[4:]):
            raise ForgedSignatureError(f"the signature of {key.key_id} does not verify")
        found = True
    if not found:
        raise LedgerIntegrityError(f"the note is not signed by {key.key_id}")
    return text
