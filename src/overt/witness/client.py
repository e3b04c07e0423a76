"""Sending a checkpoint to cosigning witnesses (C2SP tlog-witness ``add-checkpoint``)
and keeping their cosignatures beside the checkpoint note.

Each witness gets the consistency proof from the size it last cosigned (the newest
``<size>.cosignatures`` file in the witness directory holding its line; 0 when
none). A 409 names the size the witness holds: the request is made once more from
there. A cosignature is checked against the witness's key before it is kept.

A witness that is down or refuses is logged and reported; the checkpoint is never
held back for it, and the next checkpoint is sent to it from its last size. A
refusal that names the checkpoint the witness cosigned instead (a fork, a
rollback) is kept beside ours (:mod:`overt.witness.refusals`), for ``verify``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from overt.errors import LedgerIntegrityError
from overt.witness.notes import Cosignature, WitnessKey, verify_cosignature
from overt.witness.refusals import Refused, keep_refusal

log = logging.getLogger(__name__)
SUFFIX = ".cosignatures"
TIMEOUT_S = 10.0

Proof = Callable[[int, int], list[bytes]]
"""``proof(old, new)``: the consistency proof from ``old`` entries to ``new``."""


@dataclass(frozen=True, slots=True)
class Cosigner:
    """A configured witness: where it listens and the key it cosigns with."""

    url: str
    key: WitnessKey


def cosignatures_path(directory: Path, size: int) -> Path:
    return directory / f"{size:012d}{SUFFIX}"


def last_size(directory: Path, key: WitnessKey) -> int:
    """The largest size with a kept cosignature line naming ``key``; 0 when none."""
    if not directory.exists():
        return 0
    for path in sorted(directory.glob(f"*{SUFFIX}"), reverse=True):
        stem = path.name[:-len(SUFFIX)]
        if not stem.isdigit():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                cosig = Cosignature.parse(line)
            except LedgerIntegrityError:
                continue
            if cosig.name == key.name and cosig.key_id == key.key_id:
                return int(stem)
    return 0


def _request(old: int, proof: Sequence[bytes], note: str) -> bytes:
    lines = [f"old {old}", *(base64.b64encode(p).decode() for p in proof)]
    return ("\n".join(lines) + "\n\n" + note).encode("utf-8")


def _post(url: str, body: bytes) -> tuple[int, str, str]:
    request = urllib.request.Request(url.rstrip("/") + "/add-checkpoint", data=body,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
            return reply.status, reply.headers.get("Content-Type", ""), reply.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def ask(cosigner: Cosigner, note: str, body: str, size: int, old: int, proof: Proof) -> str:
    """The witness's checked cosignature line of ``note`` (``body`` is its text).

    Raises:
        OSError: the witness cannot be reached.
        LedgerIntegrityError: it refused, or answered with no valid cosignature.
    """
    for attempt in range(2):
        steps = proof(old, size) if 0 < old < size else []
        status, ctype, text = _post(cosigner.url, _request(old, steps, note))
        if status == 409 and ctype.startswith("text/x.tlog.size") and attempt == 0:
            held = text.strip()
            if not held.isdigit():
                raise LedgerIntegrityError(f"witness {cosigner.key.label} answered 409 with "
                                           f"no size: {held[:60]!r}")
            old = int(held)  # beyond ours: the witness refuses it as a rollback, saying why
            continue
        message, blank, conflicting = text.partition("\n\n")
        if status in (400, 422) and blank and conflicting:
            raise Refused(f"witness {cosigner.key.label} refused ({status}): "
                          f"{message.strip()[:200]}", cosigner.key.label, status, conflicting)
        if status != 200:
            raise LedgerIntegrityError(f"witness {cosigner.key.label} refused ({status}): "
                                       f"{text.strip()[:200]}")
        line = text.strip("\n")
        verify_cosignature(body, line, cosigner.key)
        return line + "\n"
    raise LedgerIntegrityError(f"witness {cosigner.key.label} answered 409 twice")


async def cosign_all(note: str, body: str, size: int, cosigners: Sequence[Cosigner],
                     directory: Path, proof: Proof) -> tuple[list[str], list[str]]:
    """Send ``note`` to every cosigner at once and keep the cosignatures in
    ``<size>.cosignatures`` beside it; (labels that cosigned, failures with why)."""
    async def one(cosigner: Cosigner) -> str | Exception:
        old = last_size(directory, cosigner.key)
        try:
            return await asyncio.to_thread(ask, cosigner, note, body, size, old, proof)
        except Refused as exc:
            keep_refusal(directory, size, note, exc)
            return exc
        except (OSError, LedgerIntegrityError) as exc:
            return exc

    answers = await asyncio.gather(*(one(c) for c in cosigners))
    took: list[str] = []
    failed: list[str] = []
    lines: list[str] = []
    for cosigner, answer in zip(cosigners, answers, strict=True):
        if isinstance(answer, str):
            took.append(cosigner.key.label)
            lines.append(answer)
        else:
            log.warning("witness %s at %s did not cosign the checkpoint of %d entries: %s",
                        cosigner.key.label, cosigner.url, size, answer)
            failed.append(f"witness {cosigner.key.label}: {answer}")
    if lines:
        path = cosignatures_path(directory, size)
        directory.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(lines)
    return took, failed


def read_cosignatures(directory: Path, size: int) -> list[str]:
    """The cosignature lines kept beside the checkpoint of ``size`` (unchecked)."""
    path = cosignatures_path(directory, size)
    if not path.exists():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line]
