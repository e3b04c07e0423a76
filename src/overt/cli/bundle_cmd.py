"""``overt export --bundle FILE`` and ``overt check-bundle FILE --key PUB``: evidence
bundles (see :mod:`overt.ledger.bundle`, docs/spec/evidence-bundle.md).

Exit codes (as ``overt``'s): 0 ok; 2 usage; 3 the bundle does not verify (the first
failure named) or the ledger disagrees with its checkpoint; 4 nothing in scope;
5 a file or the ledger could not be read or written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from overt.cli import flags, proofs_cmd
from overt.cli.flags import time_flag
from overt.config import Config
from overt.errors import LedgerError, LedgerIntegrityError, UsageError
from overt.ledger import bundle, checkpoints, signing
from overt.witness.client import read_cosignatures

COMMANDS = ("check-bundle",)
EXIT_OK, EXIT_VERIFY = 0, 3


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``check-bundle``, and the bundle flags of ``overt export`` (added by
    :mod:`.trail_cmd`)."""
    export = sub.choices["export"]
    group = export.add_argument_group(
        "evidence bundle", "--bundle FILE writes whole turns, their bodies, an inclusion "
        "proof of each entry and the signed checkpoint, for `overt check-bundle` or "
        "verifier/overt_verify_bundle.py to check offline")
    group.add_argument("--bundle", metavar="FILE", help="write an evidence bundle here")
    group.add_argument("--session", metavar="ID", type=flags.session_id,
                       help="every turn of this session")
    group.add_argument("--turn", metavar="ID", type=flags.turn_id,
                       help="this turn")
    group.add_argument("--since", metavar="T", help="every turn with an entry from T on")
    group.add_argument("--until", metavar="T", help="... and before T")
    group.add_argument("--withhold-bodies", action="store_true",
                       help="hold only the bodies' digests (a redacted bundle still verifies)")
    group.add_argument("--key", metavar="PUBLIC", help="the public key checkpoints are "
                       "signed with (default: [checkpoints] private_key + .pub)")
    group.add_argument("--checkpoints", metavar="DIR", help="the witness directory "
                       "(default: [checkpoints] witness_dir)")
    check = sub.add_parser("check-bundle", help="check an evidence bundle offline with the "
                           "log's public key alone, and summarise it")
    check.add_argument("file", help="the bundle (from overt export --bundle); - for stdin")
    check.add_argument("--key", metavar="PUBLIC", required=True,
                       help="the log's public key file")
    check.add_argument("--json", action="store_true")
    proofs_cmd.add_quorum_flags(check)


def wants_bundle(args: argparse.Namespace) -> bool:
    """Whether ``overt export`` is to write a bundle.

    Raises:
        UsageError: a bundle flag without --bundle.
    """
    if args.bundle is not None:
        return True
    stray = [flag for flag, value in (("--session", args.session), ("--turn", args.turn),
                                      ("--since", args.since), ("--until", args.until),
                                      ("--key", args.key), ("--checkpoints", args.checkpoints),
                                      ("--withhold-bodies", args.withhold_bodies or None))
             if value is not None]
    if stray:
        raise UsageError(f"{', '.join(stray)}: for an evidence bundle (--bundle FILE)")
    return False


def scope_of(args: argparse.Namespace) -> tuple[str, str | None, str | None, str | None]:
    """(scope, subject, since, until) from the flags.

    Raises:
        UsageError: not exactly one of a session, a turn, or a time range.
    """
    since, until = time_flag(args.since, "--since"), time_flag(args.until, "--until")
    ranged = since is not None or until is not None
    given = [args.session is not None, args.turn is not None, ranged]
    if sum(given) != 1 or getattr(args, "id", None) is not None:
        raise UsageError("a bundle is of one session (--session ID), one turn (--turn ID) or "
                         "a time range (--since/--until), and takes no positional id")
    if since is not None and until is not None and since >= until:
        raise UsageError(f"--since ({since}) must be before --until ({until})")
    if args.session is not None:
        return bundle.SESSION, args.session, None, None
    if args.turn is not None:
        return bundle.TURN, args.turn, None, None
    return bundle.RANGE, None, since, until


async def export(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    """``overt export --bundle FILE``: sign a checkpoint first if the turns are newer than
    the newest one (and a key is set up), then write the bundle."""
    scope, subject, since, until = scope_of(args)
    key = signing.read_public(proofs_cmd.public_path(config, args.key))
    directory = proofs_cmd.witness_dir(config, args.checkpoints)
    turns = await bundle.turns_in_scope(ledger, scope, subject, since, until)
    last = await bundle.last_seq(ledger, turns)
    found_cp, _ = checkpoints.read_witness_dir(directory, key) if directory.is_dir() \
        else ([], [])
    note, checkpoint = (found_cp[-1][0].read_text(encoding="utf-8"), found_cp[-1][1]) \
        if found_cp else (None, None)
    settings = proofs_cmd.settings_of(config)
    if (checkpoint is None or last > checkpoint.size) and settings is not None \
            and Path(settings.witness_dir) == directory \
            and Path(settings.private_key).exists():
        try:
            checkpoint, note = await checkpoints.make(
                ledger, signing.read_private(Path(settings.private_key)), settings)
        except checkpoints.SignedWithFindings as exc:
            checkpoint, note = exc.checkpoint, exc.note
            print(f"overt: {exc}", file=sys.stderr)
    if checkpoint is None or note is None:
        raise UsageError(f"no checkpoint signed by {key.key_id} in {directory}: make one "
                         "with `overt ledger checkpoint`")
    found: list[str] = []
    left_out: list[str] = []
    cosigners = settings.cosigners if settings is not None else ()
    cosignatures = bundle.cosignatures_of(
        checkpoint, read_cosignatures(directory, checkpoint.size),
        [c.key for c in cosigners], left_out)
    for line in left_out:
        print(f"overt: not in the bundle: {line}", file=sys.stderr)
    try:
        made = await bundle.make(ledger, scope, subject, note, checkpoint, key, since=since,
                                 until=until, withhold=args.withhold_bodies,
                                 cosignatures=cosignatures, found=found)
    except LedgerIntegrityError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return EXIT_VERIFY
    for line in found:
        print(f"overt: {line}; run `overt ledger verify --checkpoints`", file=sys.stderr)
    text = bundle.dump(made)
    try:
        if args.bundle == "-":
            sys.stdout.write(text)
        else:
            Path(args.bundle).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise LedgerError(f"cannot write {args.bundle}: {exc}") from exc
    withheld = len(made["withheld"])
    print(f"overt: bundle of {len(made['turns'])} turns, {len(made['entries'])} entries, "
          f"{len(made['bodies'])} bodies ({withheld} withheld), under the checkpoint of "
          f"{checkpoint.size} entries ({checkpoint.time}) signed by {key.key_id}, "
          f"{len(made['cosignatures'])} witness cosignatures", file=sys.stderr)
    return EXIT_OK


def check(args: argparse.Namespace) -> int:
    """``overt check-bundle FILE --key PUB [--witness-key K]... [--quorum N]``: no
    ledger."""
    key = signing.read_public(Path(args.key))
    quorum = proofs_cmd.quorum_of(args)
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read {args.file}: {exc}") from exc
    try:
        summary = bundle.check(data, key, quorum)
    except LedgerIntegrityError as exc:
        print(f"FAILED: {exc}")
        return EXIT_VERIFY
    if args.json:
        print(json.dumps({"ok": True, **summary.__dict__}, indent=2))
    else:
        print(summary.text())
    return EXIT_OK
