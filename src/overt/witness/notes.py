"""C2SP ``tlog-cosignature`` cosignature/v1 (Ed25519): witness keys and the
cosignature lines they add to a checkpoint.

Key ID
    ``SHA-256(name || "\\n" || 0x04 || public key)[:4]``. The verifier key (vkey) is
    ``NAME+HEX(key ID)+BASE64(0x04 || public key)``; the 0x04 type byte keeps a
    witness key apart from a log key (0x01), so neither can stand for the other.

Signed message
    ``cosignature/v1\\n`` then ``time <unix seconds>\\n`` then the checkpoint body
    (every line, final newline included, no signature lines).

Cosignature line
    ``— NAME BASE64(key ID (4) || timestamp (8, big-endian) || signature (64))``.

Needs the ``cryptography`` package (``pip install 'overt[proofs]'``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass

from overt.errors import ForgedSignatureError, LedgerIntegrityError, UsageError
from overt.ledger.signing import DASH, PrivateKey, PublicKey

ALG_COSIGNATURE_V1 = b"\x04"
HEADER = "cosignature/v1\n"
MAX_TIMESTAMP = 2**63 - 1


def key_id(name: str, public: bytes) -> bytes:
    """The 4-byte key ID of a cosignature/v1 key."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ALG_COSIGNATURE_V1
                          + public).digest()[:4]


def _check_name(name: str) -> str:
    if not name or "+" in name or any(c.isspace() for c in name) or not name.isprintable():
        raise UsageError(f"a witness name has no spaces and no '+': {name!r}")
    return name


def _b64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError(f"the {what} is not base64") from exc
    if base64.b64encode(raw).decode() != text:
        raise UsageError(f"the {what} is not in canonical base64")
    return raw


@dataclass(frozen=True, slots=True)
class WitnessKey:
    """A witness's public key: its name and raw 32-byte Ed25519 key."""

    name: str
    public: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public)

    @property
    def label(self) -> str:
        """``NAME+HEX(key ID)``, how reports name the witness."""
        return f"{self.name}+{self.key_id.hex()}"

    def encode(self) -> str:
        """The vkey ``NAME+HEX(key ID)+BASE64(0x04 || public key)``."""
        return f"{self.label}+{base64.b64encode(ALG_COSIGNATURE_V1 + self.public).decode()}"

    @classmethod
    def parse(cls, text: str) -> WitnessKey:
        """A cosignature/v1 vkey.

        Raises:
            UsageError: not a vkey, not of type 0x04, or its key ID does not match.
        """
        parts = text.strip().split("+", 2)
        if len(parts) != 3:
            raise UsageError("not a witness vkey (NAME+KEYID+BASE64)")
        name, id_hex, encoded = parts
        raw = _b64(encoded, "witness vkey")
        if len(raw) != 33 or raw[:1] != ALG_COSIGNATURE_V1:
            raise UsageError("not a cosignature/v1 (Ed25519, type 0x04) witness vkey")
        key = cls(_check_name(name), raw[1:])
        if key.key_id.hex() != id_hex:
            raise UsageError("the witness vkey's key ID does not match its name and key")
        return key


@dataclass(frozen=True, slots=True)
class WitnessSigner:
    """A witness's private key: its name and 32-byte Ed25519 seed."""

    name: str
    seed: bytes

    @property
    def _ed(self) -> PrivateKey:
        return PrivateKey(self.name, self.seed)

    @property
    def public(self) -> WitnessKey:
        return WitnessKey(self.name, self._ed.public.public)

    def encode(self) -> str:
        return (f"PRIVATE+KEY+{self.public.label}+"
                f"{base64.b64encode(ALG_COSIGNATURE_V1 + self.seed).decode()}")

    @classmethod
    def generate(cls, name: str) -> WitnessSigner:
        return cls(_check_name(name), os.urandom(32))

    @classmethod
    def parse(cls, text: str) -> WitnessSigner:
        """A witness signer key (``PRIVATE+KEY+NAME+KEYID+BASE64(0x04 || seed)``).

        Raises:
            UsageError: not a witness signer key.
        """
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise UsageError("not a witness signer key (PRIVATE+KEY+NAME+KEYID+BASE64)")
        raw = _b64(parts[4], "witness signer key")
        if len(raw) != 33 or raw[:1] != ALG_COSIGNATURE_V1:
            raise UsageError("not a cosignature/v1 witness signer key")
        key = cls(_check_name(parts[2]), raw[1:])
        if key.public.key_id.hex() != parts[3]:
            raise UsageError("the witness signer key's key ID does not match its name and key")
        return key

    def cosign(self, body: str, timestamp: int) -> str:
        """The cosignature line (with its newline) over the checkpoint ``body``."""
        signature = self._ed.sign(signed_message(body, timestamp))
        blob = self.public.key_id + timestamp.to_bytes(8, "big") + signature
        return f"{DASH} {self.name} {base64.b64encode(blob).decode()}\n"


def signed_message(body: str, timestamp: int) -> bytes:
    """What a cosignature/v1 signs: header, time line, then the checkpoint body."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise UsageError(f"a cosignature timestamp is 0..2^63-1, not {timestamp}")
    if not body.endswith("\n") or "\n\n" in body:
        raise UsageError("a checkpoint body is non-empty lines, each ending in a newline")
    return f"{HEADER}time {timestamp}\n{body}".encode()


@dataclass(frozen=True, slots=True)
class Cosignature:
    """A parsed cosignature line: who, when, and the 64-byte signature."""

    name: str
    key_id: bytes
    timestamp: int
    signature: bytes

    @classmethod
    def parse(cls, line: str) -> Cosignature:
        """One ``— NAME BASE64(...)`` line (no newline).

        Raises:
            LedgerIntegrityError: not a cosignature/v1 line.
        """
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != DASH:
            raise LedgerIntegrityError(f"not a signature line: {line[:80]!r}")
        try:
            raw = _b64(parts[2], "cosignature")
        except UsageError as exc:
            raise LedgerIntegrityError(str(exc)) from exc
        if len(raw) != 4 + 8 + 64:
            raise LedgerIntegrityError("a cosignature/v1 line holds 76 bytes")
        timestamp = int.from_bytes(raw[4:12], "big")
        if timestamp > MAX_TIMESTAMP:
            raise LedgerIntegrityError("a cosignature timestamp above 2^63-1")
        return cls(parts[1], raw[:4], timestamp, raw[12:])


def verify_cosignature(body: str, line: str, key: WitnessKey) -> int:
    """The timestamp of ``line``, if it is ``key``'s valid cosignature of ``body``.

    Raises:
        LedgerIntegrityError: the line is malformed or names another key.
        ForgedSignatureError: it names ``key`` but its signature does not verify.
    """
    cosig = Cosignature.parse(line.rstrip("\n"))
    if cosig.name != key.name or cosig.key_id != key.key_id:
        raise LedgerIntegrityError(f"the cosignature is not by {key.label}")
    if not PublicKey(key.name, key.public).verify(signed_message(body, cosig.timestamp),
                                                  cosig.signature):
        raise ForgedSignatureError(f"the cosignature of {key.label} does not verify")
    return cosig.timestamp


def split_note(note: str) -> tuple[str, list[str]]:
    """A signed note's body (final newline included) and its signature lines.

    Raises:
        LedgerIntegrityError: not a signed note.
    """
    body, sep, signatures = note.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise LedgerIntegrityError("not a signed note (text, a blank line, signatures)")
    return body + "\n", signatures[:-1].split("\n")


def valid_cosigners(note: str, keys: list[WitnessKey]) -> set[WitnessKey]:
    """The listed keys with a valid cosignature on ``note``; lines naming keys not
    listed are ignored, as the spec asks of clients.

    Raises:
        ForgedSignatureError: a line names a listed key but does not verify.
    """
    body, lines = split_note(note)
    found: set[WitnessKey] = set()
    for line in lines:
        try:
            cosig = Cosignature.parse(line)
        except LedgerIntegrityError:
            continue  # a log signature line (68 bytes) or another type: not ours to judge
        for key in keys:
            if cosig.name == key.name and cosig.key_id == key.key_id:
                verify_cosignature(body, line, key)
                found.add(key)
    return found
