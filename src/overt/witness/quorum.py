"""A quorum policy: N valid cosignatures of one checkpoint, each from a distinct key
of a listed set. A key listed twice, or cosigning twice, counts once; lines naming
keys not listed are ignored; a line naming a listed key that does not verify is a
forgery, reported as such."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from overt.errors import ForgedSignatureError, LedgerIntegrityError, UsageError
from overt.witness.notes import Cosignature, WitnessKey, verify_cosignature


@dataclass(frozen=True, slots=True)
class Quorum:
    """``needed`` of ``keys`` (distinct by name and key ID)."""

    keys: tuple[WitnessKey, ...]
    needed: int

    def __post_init__(self) -> None:
        if self.needed < 1:
            raise UsageError(f"a quorum is at least 1, not {self.needed}")
        if self.needed > len(set(self.keys)):
            raise UsageError(f"a quorum of {self.needed} needs as many distinct witness keys; "
                             f"{len(set(self.keys))} given")


@dataclass(frozen=True, slots=True)
class QuorumResult:
    """Which listed keys cosigned validly, which did not, which lines were forged."""

    cosigned: tuple[str, ...]
    missing: tuple[str, ...]
    forged: tuple[str, ...]
    needed: int

    @property
    def ok(self) -> bool:
        return not self.forged and len(self.cosigned) >= self.needed

    def problem(self) -> str:
        parts = []
        if self.forged:
            parts.append("forged cosignatures: " + "; ".join(self.forged))
        if len(self.cosigned) < self.needed:
            parts.append(f"{len(self.cosigned)} of the {self.needed} cosignatures the quorum "
                         f"needs (missing: {', '.join(self.missing) or 'none listed'})")
        return "; ".join(parts)


def check(body: str, lines: Sequence[str], quorum: Quorum) -> QuorumResult:
    """Count the cosignatures ``lines`` hold of the checkpoint ``body``."""
    keys = list(dict.fromkeys(quorum.keys))
    cosigned: list[WitnessKey] = []
    forged: list[str] = []
    for line in lines:
        try:
            cosig = Cosignature.parse(line)
        except LedgerIntegrityError:
            continue
        for key in keys:
            if cosig.name != key.name or cosig.key_id != key.key_id:
                continue
            try:
                verify_cosignature(body, line, key)
            except ForgedSignatureError as exc:
                forged.append(str(exc))
                continue
            if key not in cosigned:
                cosigned.append(key)
    return QuorumResult(tuple(k.label for k in cosigned),
                        tuple(k.label for k in keys if k not in cosigned),
                        tuple(forged), quorum.needed)


def read_key(text: str) -> WitnessKey:
    """A witness vkey given as itself or as the path of a file holding it.

    Raises:
        UsageError: neither.
    """
    path = Path(text)
    if "+" not in text or path.is_file():
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the witness key {path}: {exc}") from exc
    return WitnessKey.parse(text)
