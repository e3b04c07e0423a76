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

A prune is signed, exactly: a checkpoint says the ledger is pruned through what is
gone from it (``min(seq) - 1``), never what a ``ledger.pruned`` entry claims (one
INSERT could claim anything). That must be what the witness's newest checkpoint
says, except in the checkpoint ``overt ledger prune`` makes right after pruning
(``prune``: its own record), which must have removed exactly the range after
it. So a prefix deleted by hand is never signed over, and a forged
``ledger.pruned`` entry is never signed by the operator's next prune.

Signing recomputes every subtree it signs from the entries (:func:`.tree.fill`),
except the tiles under the newest checkpoint already signed, taken once they give
its root (:func:`.tree.extend`).
Something in the ledger that overt did not write (a stored tile that is not its
leaves' hash, a ``ledger.pruned`` entry no prune wrote) does not stop a
checkpoint, which is signed from the entries all the same; :func:`make` raises
:class:`SignedWithFindings` after recording it, so the command fails (exit 3)
and ``overt serve`` logs it with every checkpoint. A forged ``ledger.pruned``
entry stays in the chain; once the operator has looked into it, ``overt ledger
disown-seal SEQ`` signs, with the checkpoint key, a note in the witness
directory (``disowned-<seq>.disowned``) that it is not theirs, and prunes and
``verify --checkpoints`` go on, naming it.
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
from overt.events import LedgerCheckpointed, LedgerPruned
from overt.ledger import retention, sql, tree
from overt.ledger.signing import PrivateKey, PublicKey, open_note, sign_note
from overt.ledger.sql import Dialect
from overt.witness.client import Cosigner, cosign_all

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
    cosigners: tuple[Cosigner, ...] = ()

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
        for cosigner in self.cosigners:
            if not cosigner.url.startswith(("http://", "https://")):
                raise ConfigError(f"a cosigning witness URL is http(s)://…, not "
                                  f"{cosigner.url!r}")


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
    """(head seq, the seq the ledger is pruned through): what is there, not what any
    ``ledger.pruned`` entry says (one INSERT could say anything)."""
    rows = await ledger.select(tree.BOUNDS, ())
    if not rows or rows[0][0] is None:
        return 0, 0
    return int(rows[0][1]), int(rows[0][0]) - 1


def origin_of(t: tree.Tree) -> str:
    return ORIGIN_PREFIX + t.perfect(0, 1).hex()[:32]


async def compute(ledger: Any, *, size: int | None = None,
                  after: Checkpoint | None = None) -> tuple[Checkpoint, tree.Tree]:
    """The (unsigned) checkpoint of the ledger now (or of its first ``size``
    entries), and the tree, its new tiles ready to store.

    ``after``: the newest checkpoint already signed. Where the ledger still ends in
    the entry it signed (same head hash, same prune), the stored tiles under it
    are taken once they give its root (:func:`.tree.extend`): a routine checkpoint
    hashes the entries since, not the ledger. Else every subtree is recomputed
    from the entries (:func:`.tree.fill`).

    Raises:
        LedgerError: the ledger is empty, or its tree cannot be built (a pruned prefix
            with no stored subtrees standing in for it).
    """
    head, pruned = await state(ledger)
    n = head if size is None else size
    if n < 1 or n > head:
        raise LedgerError(f"no checkpoint of {n} entries in a ledger of {head}")
    d = dialect(ledger)
    rows = await ledger.select(f"SELECT seq, hash FROM audit_log WHERE seq IN ({d.ph}, {d.ph})",
                               (n, after.size if after is not None else n))
    hashes = {int(seq): digest for seq, digest in rows}
    if n not in hashes:
        raise LedgerError(f"entry {n} is not in the ledger")
    t = None
    if (after is not None and after.pruned == pruned and pruned < after.size <= n
            and hashes.get(after.size) == after.head):
        t = await tree.extend(ledger.select, d, n, after.size, after.root)
    if t is None:
        t = await tree.fill(ledger.select, d, n)
    return Checkpoint(origin_of(t), n, t.root(), hashes[n], now_iso(), pruned), t


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


class SignedWithFindings(LedgerIntegrityError):
    """The checkpoint was made, from the entries, signed, witnessed and recorded; but the
    ledger holds something no overt code path wrote (a stored tile that is not the
    hash of its leaves, a ``ledger.pruned`` entry no prune wrote)."""

    def __init__(self, message: str, checkpoint: Checkpoint, note: str) -> None:
        super().__init__(message)
        self.checkpoint, self.note = checkpoint, note


async def make(ledger: Any, key: PrivateKey, settings: CheckpointSettings, *,
               prune: LedgerPruned | None = None) -> tuple[Checkpoint, str]:
    """Make, sign, witness and record a checkpoint of the ledger now; (it, its note).

    Every subtree it signs is recomputed from the entries' chain hashes
    (:func:`.tree.fill`), except the tiles under the witness's newest checkpoint,
    taken once they give its root (:func:`.tree.extend`); the stored tree stands in
    only for those and for a pruned prefix. It
    says the ledger is pruned through what is gone from it, which must be what the
    witness's newest checkpoint says, or, right after ``overt ledger prune``
    (``prune``: that prune's own record), exactly the range that prune removed.

    Raises:
        LedgerIntegrityError: the ledger does not extend the witness's newest
            checkpoint, or is pruned other than it (or ``prune``) says; nothing was
            signed.
        SignedWithFindings: it was signed and recorded, and the ledger holds a stored
            tile or a ``ledger.pruned`` entry that overt did not write.
        LedgerError: the ledger cannot be read or written, or a witness failed
            (after the others took the checkpoint and it was recorded).
    """
    directory = Path(settings.witness_dir)
    previous, _ = read_witness_dir(directory, key.public) if directory.exists() else ([], [])
    last = previous[-1][1] if previous else None
    checkpoint, t = await compute(ledger, after=last if prune is None else None)
    if prune is not None:
        start = (last.pruned if last is not None else prune.first_removed_seq - 1
                 if prune.first_removed_seq else 0)
        if (prune.first_removed_seq, prune.through_seq) != (start + 1, checkpoint.pruned):
            raise LedgerIntegrityError(
                f"the prune removed entries {prune.first_removed_seq}..{prune.through_seq}, "
                f"but the ledger is pruned through entry {checkpoint.pruned} and the newest "
                f"signed checkpoint says {start}: entries gone that no prune removed; run "
                "`overt ledger verify --checkpoints`")
    elif last is not None and checkpoint.pruned != last.pruned:
        raise LedgerIntegrityError(
            f"the ledger is pruned through entry {checkpoint.pruned}, but the newest "
            f"signed checkpoint says {last.pruned}: a prune no checkpoint signed (one "
            "made by hand?); run `overt ledger verify --checkpoints`")
    if last is not None:
        check_successor(last, checkpoint, t)
    note = sign_note(checkpoint.text(), key)
    took, failed = witness(note, checkpoint, settings)
    if settings.cosigners:
        # a cosigner down or refusing is logged there and never holds the checkpoint back
        cosigned, _ = await cosign_all(note, checkpoint.text(), checkpoint.size,
                                       settings.cosigners, directory, t.consistency)
        took.extend(cosigned)
    signature = note.rsplit(" ", 1)[1].strip()
    await ledger.record([LedgerCheckpointed(
        origin=checkpoint.origin, tree_size=checkpoint.size,
        root_hash=base64.b64encode(checkpoint.root).decode(), head_hash=checkpoint.head,
        checkpoint_time=checkpoint.time, pruned_through=checkpoint.pruned,
        key_id=key.public.key_id, signature=signature, witnesses=took)],
        rows=t.new_nodes)
    if failed:
        raise LedgerError("checkpoint witnesses failed: " + "; ".join(failed))
    findings = ([t.bad_text()] if t.bad else []) + [
        s.text() for s in await retention.forged_seals(ledger.select, dialect(ledger))
        if read_disowned(directory, key.public, checkpoint.origin).get(s.seq) != s.hash]
    if findings:
        raise SignedWithFindings(
            f"signed the checkpoint of {checkpoint.size} entries from the entries "
            f"themselves (pruned through {checkpoint.pruned}), but: " + "; ".join(findings)
            + "; run `overt ledger verify --checkpoints` (see \"Signed checkpoints and "
            "proofs\" in the README for what to do)", checkpoint, note)
    return checkpoint, note


DISOWNED = ".disowned"


def disown_text(origin: str, seq: int, entry_hash: str, time: str) -> str:
    return f"{origin}\ndisown {seq} {entry_hash}\ntime {time}\n"


def write_disowned(directory: Path, key: PrivateKey, origin: str, seq: int,
                   entry_hash: str) -> Path:
    """Sign, as ``key``, that entry ``seq`` (a ``ledger.pruned`` entry no prune wrote)
    is disowned, into ``directory`` (``disowned-<seq>.disowned``)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"disowned-{seq:012d}{DISOWNED}"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(sign_note(disown_text(origin, seq, entry_hash, now_iso()), key),
                         encoding="utf-8")
    os.replace(temporary, path)
    return path


def read_disowned(directory: Path, key: PublicKey, origin: str) -> dict[int, str]:
    """The entries ``key`` disowned in ``directory`` for the ledger ``origin``: seq ->
    the entry's chain hash. Files it did not sign are passed over."""
    found: dict[int, str] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*" + DISOWNED)):
        try:
            lines = open_note(path.read_text(encoding="utf-8"), key).split("\n")
            words = lines[1].split(" ")
            if lines[0] == origin and len(words) == 3 and words[0] == "disown":
                found[int(words[1])] = words[2]
        except (OSError, UnicodeDecodeError, LedgerIntegrityError, ValueError, IndexError):
            continue
    return found


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
