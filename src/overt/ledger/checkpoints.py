"""Signed checkpoints of the ledger, kept outside it by witnesses.

A checkpoint is a C2SP ``tlog-checkpoint`` body signed as a note
(:mod:`.signing`)::

    overt/ledger/<ledger id>          origin: 32 hex digits of entry 1's leaf hash
    <tree size>                       entries 1..N are in the tree
    <base64 Merkle root>              RFC 9162 root of the tree (see :mod:`.merkle`)
    head sha256:<hex>                 the chain hash of entry N
    time 2026-11-24T21:00:00.000000Z  when it was made
    pruned <seq>                      the ledger was pruned through this seq (0: never)

    — <key name> <base64(key hash || Ed25519 signature)>

Each checkpoint is appended to the ledger as a ``ledger.checkpoint`` entry and
handed to every witness: a directory (``<size, 12 digits>.checkpoint``, one file
each), any command (the note on its stdin) and any URL (an HTTP POST of the note).
A witness that fails makes :func:`make` raise after the others took it.

A prune is signed: ``pruned`` only moves forward in a checkpoint that
``overt ledger prune`` makes right after pruning (``allow_prune``); any other
checkpoint refuses a ledger pruned further than the witness's newest checkpoint
says, so a prefix deleted by hand, with a forged ``ledger.pruned`` entry, is
never signed over.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overt.clock import now_iso
from overt.errors import ConfigError, LedgerError, LedgerIntegrityError
from overt.events import LedgerCheckpointed
from overt.ledger import sql, tree
from overt.ledger.signing import PrivateKey, PublicKey, open_note, sign_note
from overt.ledger.sql import Dialect

ORIGIN_PREFIX = "overt/ledger/"
_HEAD = re.compile(r"sha256:[0-9a-f]{64}")
SUFFIX = ".checkpoint"
WITNESS_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class CheckpointSettings:
    """``[checkpoints]``: the signing key (a file outside the ledger), the witness
    directory, extra witnesses, and how often ``overt serve`` makes one (after
    ``every_entries`` new entries or ``every_seconds``, whichever comes first)."""

    private_key: str
    witness_dir: str
    commands: tuple[tuple[str, ...], ...] = ()
    urls: tuple[str, ...] = ()
    every_entries: int = 10_000
    every_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.every_entries < 1:
            raise ConfigError(f"checkpoints every_entries must be at least 1, got "
                              f"{self.every_entries}")
        if self.every_seconds <= 0:
            raise ConfigError(f"checkpoints every_seconds must be positive, got "
                              f"{self.every_seconds}")
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"a checkpoint witness URL is http(s)://…, not {url!r}")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a checkpoint says (see the module docstring)."""

    origin: str
    size: int
    root: bytes
    head: str
    time: str
    pruned: int

    def text(self) -> str:
        return (f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"
                f"head {self.head}\ntime {self.time}\npruned {self.pruned}\n")

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """A checkpoint's body, exactly as :meth:`text` writes it.

        Raises:
            LedgerIntegrityError: it is not one, byte for byte.
        """
        lines = text.split("\n")
        try:
            if len(lines) != 7 or lines[6] != "" or not lines[0].startswith(ORIGIN_PREFIX):
                raise ValueError("not six lines")
            fields = [line.split(" ", 1) for line in lines[3:6]]
            if [f[0] for f in fields] != ["head", "time", "pruned"]:
                raise ValueError("not head, time, pruned")
            found = cls(lines[0], int(lines[1]), base64.b64decode(lines[2], validate=True),
                        fields[0][1], fields[1][1], int(fields[2][1]))
        except (ValueError, IndexError, binascii.Error) as exc:
            raise LedgerIntegrityError(f"not an overt checkpoint: {exc}") from exc
        if (found.text() != text or len(found.root) != 32 or not _HEAD.fullmatch(found.head)
                or found.size < 1 or not 0 <= found.pruned <= found.size + 1
                or not found.time or " " in found.time):
            raise LedgerIntegrityError("not an overt checkpoint in its one written form")
        return found

    @classmethod
    def open(cls, note: str, key: PublicKey) -> Checkpoint:
        """The checkpoint in ``note``, if ``key`` signed it.

        Raises:
            LedgerIntegrityError: malformed, or not signed by ``key``.
        """
        return cls.parse(open_note(note, key))


def dialect(ledger: Any) -> Dialect:
    return sql.SQLITE if getattr(ledger, "backend", "sqlite") == "sqlite" else sql.POSTGRES


async def state(ledger: Any) -> tuple[int, int]:
    """(head seq, the seq the ledger is pruned through)."""
    d = dialect(ledger)
    head = tree.head_size(await ledger.select("SELECT max(seq) FROM audit_log", ()))
    rows = await ledger.select(sql.prune_anchors(d), ())
    return head, max((int(s) for s, h in rows if s is not None and h is not None), default=0)


def origin_of(t: tree.Tree) -> str:
    return ORIGIN_PREFIX + t.perfect(0, 1).hex()[:32]


async def compute(ledger: Any, *, size: int | None = None) -> tuple[Checkpoint, tree.Tree]:
    """The (unsigned) checkpoint of the ledger now (or of its first ``size``
    entries), and the tree, its new tiles ready to store.

    Raises:
        LedgerError: the ledger is empty, or its tree cannot be built (a prefix pruned
            before overt kept the tree).
    """
    head, pruned = await state(ledger)
    n = head if size is None else size
    if n < 1 or n > head:
        raise LedgerError(f"no checkpoint of {n} entries in a ledger of {head}")
    t = await tree.fill(ledger.select, dialect(ledger), n)
    rows = await ledger.select(f"SELECT hash FROM audit_log WHERE seq = {dialect(ledger).ph}",
                               (n,))
    if not rows:
        raise LedgerError(f"entry {n} is not in the ledger")
    return Checkpoint(origin_of(t), n, t.root(), rows[0][0], now_iso(), pruned), t


def read_witness_dir(directory: Path, key: PublicKey,
                     ) -> tuple[list[tuple[Path, Checkpoint]],
                                list[tuple[Path, LedgerIntegrityError]]]:
    """The checkpoints in ``directory`` that ``key`` signed, by size (then time), and
    the files there that are not (path, why: a :class:`ForgedSignatureError` where a
    file bears the key's signature and it does not verify).

    Raises:
        LedgerError: the directory cannot be read.
    """
    good: list[tuple[Path, Checkpoint]] = []
    bad: list[tuple[Path, LedgerIntegrityError]] = []
    try:
        paths = sorted(directory.glob("*" + SUFFIX))
    except OSError as exc:
        raise LedgerError(f"cannot read the witness directory {directory}: {exc}") from exc
    for path in paths:
        try:
            good.append((path, Checkpoint.open(path.read_text(encoding="utf-8"), key)))
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerError(f"cannot read {path}: {exc}") from exc
        except LedgerIntegrityError as exc:
            bad.append((path, exc))
    good.sort(key=lambda pc: (pc[1].size, pc[1].time))
    return good, bad


def check_successor(old: Checkpoint, new: Checkpoint, t: tree.Tree | None = None) -> None:
    """That ``new`` may follow ``old``: the same ledger, no fewer entries, no prune
    undone, and (given the ledger's tree ``t``) the old root in the new tree, unless
    the old checkpoint lies wholly inside what the new one says was pruned.

    Raises:
        LedgerIntegrityError: it may not.
    """
    if old.origin != new.origin:
        raise LedgerIntegrityError(f"checkpoints of two ledgers: {old.origin} and {new.origin}")
    if new.size < old.size or new.pruned < old.pruned:
        raise LedgerIntegrityError(f"the checkpoint of {new.size} entries (pruned through "
                                   f"{new.pruned}) goes back on one of {old.size} (pruned "
                                   f"through {old.pruned})")
    if new.size == old.size and (new.root != old.root or new.head != old.head):
        raise LedgerIntegrityError(f"two checkpoints of {old.size} entries disagree")
    if t is not None and old.size > new.pruned and t.root(old.size) != old.root:
        raise LedgerIntegrityError(f"the ledger's first {old.size} entries are not those the "
                                   f"checkpoint of {old.time} signed")


async def make(ledger: Any, key: PrivateKey, settings: CheckpointSettings, *,
               allow_prune: bool = False) -> tuple[Checkpoint, str]:
    """Make, sign, witness and record a checkpoint of the ledger now; (it, its note).

    Raises:
        LedgerIntegrityError: the ledger does not extend the witness's newest
            checkpoint, or it was pruned further with no signed prune (without
            ``allow_prune``); nothing was signed.
        LedgerError: the ledger cannot be read or written, or a witness failed
            (after the others took the checkpoint and it was recorded).
    """
    directory = Path(settings.witness_dir)
    checkpoint, t = await compute(ledger)
    previous, _ = read_witness_dir(directory, key.public) if directory.exists() else ([], [])
    if previous:
        last = previous[-1][1]
        if checkpoint.pruned > last.pruned and not allow_prune:
            raise LedgerIntegrityError(
                f"the ledger is pruned through entry {checkpoint.pruned}, but the newest "
                f"signed checkpoint says {last.pruned}: a prune no checkpoint signed (one "
                "made by hand?); run `overt ledger verify --checkpoints`")
        if last.size > last.pruned and last.size > checkpoint.pruned:
            await t.read(ledger.select, last.size - last.size % tree.TILE, last.size)
        check_successor(last, checkpoint, t)
    note = sign_note(checkpoint.text(), key)
    took, failed = witness(note, checkpoint, settings)
    signature = note.rsplit(" ", 1)[1].strip()
    await ledger.record([LedgerCheckpointed(
        origin=checkpoint.origin, tree_size=checkpoint.size,
        root_hash=base64.b64encode(checkpoint.root).decode(), head_hash=checkpoint.head,
        checkpoint_time=checkpoint.time, pruned_through=checkpoint.pruned,
        key_id=key.public.key_id, signature=signature, witnesses=took)], rows=t.new_nodes)
    if failed:
        raise LedgerError("checkpoint witnesses failed: " + "; ".join(failed))
    return checkpoint, note


def witness(note: str, checkpoint: Checkpoint,
            settings: CheckpointSettings) -> tuple[list[str], list[str]]:
    """Hand ``note`` to every witness; (what took it, what failed and why)."""
    took: list[str] = []
    failed: list[str] = []
    try:
        write_to_dir(Path(settings.witness_dir), note, checkpoint)
        took.append("dir")
    except OSError as exc:
        failed.append(f"directory {settings.witness_dir}: {exc}")
    for command in settings.commands:
        try:
            subprocess.run(list(command), input=note.encode("utf-8"), check=True,
                           timeout=WITNESS_TIMEOUT_S, capture_output=True)
            took.append("command")
        except (OSError, subprocess.SubprocessError) as exc:
            failed.append(f"command {command[0]}: {exc}")
    for url in settings.urls:
        request = urllib.request.Request(url, data=note.encode("utf-8"), method="POST",
                                         headers={"Content-Type": "text/plain; charset=utf-8"})
        try:
            with urllib.request.urlopen(request, timeout=WITNESS_TIMEOUT_S) as response:
                response.read()
            took.append("url")
        except (OSError, urllib.error.URLError) as exc:
            failed.append(f"url {url}: {exc}")
    return took, failed


def write_to_dir(directory: Path, note: str, checkpoint: Checkpoint) -> Path:
    """Write ``note`` as ``<size>.checkpoint`` in ``directory`` (whole, or not at all);
    an existing file of the same size is kept beside it with the time in its name."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{checkpoint.size:012d}{SUFFIX}"
    if path.exists():
        stamp = checkpoint.time.replace(":", "").replace("-", "")
        path = directory / f"{checkpoint.size:012d}-{stamp}{SUFFIX}"
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(note)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    return path


def commands_of(values: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(v) for v in values)
