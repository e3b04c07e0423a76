"""``overt ledger keygen | checkpoint | prove | check-proof | consistency |
disown-seal`` and ``ledger verify --checkpoints DIR --key PUB``: signed checkpoints
and Merkle proofs (see :mod:`overt.ledger.checkpoints`, :mod:`overt.ledger.proofs`).

Exit codes (as ``overt``'s): 0 ok; 2 usage (a missing key or setting); 3 a proof,
a checkpoint or the ledger against its checkpoints does not verify; 4 no such
turn; 5 the ledger, a file or a witness could not be read or written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from overt.cli import flags
from overt.config import Config, default_data_dir
from overt.errors import ForgedSignatureError, LedgerError, LedgerIntegrityError, UsageError
from overt.events import LedgerPruned
from overt.ledger import audit, checkpoints, proofs, signing
from overt.ledger.checkpoints import Checkpoint, CheckpointSettings
from overt.ledger.reads import proofs as proofs_reads
from overt.witness.client import read_cosignatures
from overt.witness.quorum import Quorum, read_key
from overt.witness.quorum import check as check_quorum

COMMANDS = ("keygen", "checkpoint", "prove", "check-proof", "consistency", "disown-seal")
EXIT_OK, EXIT_VERIFY, EXIT_BACKEND = 0, 3, 5


def add_parsers(lsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keygen = lsub.add_parser("keygen", help="make the Ed25519 key pair checkpoints are "
                             "signed with (kept outside the ledger)")
    keygen.add_argument("--name", default="overt-ledger", help="the key's name in signatures")
    keygen.add_argument("--private", metavar="PATH", help="the private key file (mode 0600; "
                        "default: [checkpoints] private_key, else checkpoint.key in the "
                        "user data dir)")
    keygen.add_argument("--public", metavar="PATH", help="the public key file (default: the "
                        "private key's path + .pub)")
    checkpoint = lsub.add_parser("checkpoint", help="sign a checkpoint of the ledger now and "
                                 "hand it to the witnesses")
    checkpoint.add_argument("--key", metavar="PRIVATE", help="the private key file")
    checkpoint.add_argument("--witness-dir", metavar="DIR", help="the witness directory")
    checkpoint.add_argument("--json", action="store_true")
    prove = lsub.add_parser("prove", help="a turn's entries, all of them, with their Merkle "
                            "inclusion proofs and a signed checkpoint, as JSON (check it "
                            "offline)")
    prove.add_argument("turn_id", nargs="?", type=flags.turn_id,
                       help="the turn (all of its entries)")
    prove.add_argument("--entry", metavar="SEQ", type=int,
                       help="prove this one entry alone instead of a whole turn")
    prove.add_argument("--checkpoints", metavar="DIR", help="the witness directory")
    prove.add_argument("--key", metavar="PUBLIC", help="the public key file")
    check = lsub.add_parser("check-proof", help="check a proof file with the public key "
                            "alone (no database)")
    check.add_argument("file", help="the proof (made by prove or consistency); - for stdin")
    check.add_argument("--key", metavar="PUBLIC", required=True)
    check.add_argument("--json", action="store_true")
    consistency = lsub.add_parser("consistency", help="the proof that checkpoint NEW extends "
                                  "checkpoint OLD, as JSON")
    consistency.add_argument("old", help="a checkpoint file")
    consistency.add_argument("new", help="a later checkpoint file")
    consistency.add_argument("--key", metavar="PUBLIC", help="the public key file")
    disown = lsub.add_parser("disown-seal", help="sign, with the checkpoint key, that a "
                             "ledger.pruned entry no prune wrote is disowned (after looking "
                             "into who wrote it): prunes and verify --checkpoints go on")
    disown.add_argument("seq", type=int, help="the seq of the forged ledger.pruned entry")
    disown.add_argument("--key", metavar="PRIVATE", help="the private key file")
    disown.add_argument("--witness-dir", metavar="DIR", help="the witness directory")


def add_verify_flags(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("--checkpoints", metavar="DIR",
                        help="also check the ledger against the signed checkpoints in DIR "
                             "(a truncated tail, a re-computed chain, a forged prune)")
    verify.add_argument("--key", metavar="PUBLIC", help="the public key checkpoints are "
                        "signed with (with --checkpoints)")
    verify.add_argument("--allow-missing", action="store_true",
                        help="with --checkpoints: a checkpoint the ledger recorded that the "
                             "witness directory lacks, or holds unsigned, is named, not a "
                             "failure")
    add_quorum_flags(verify)


def add_quorum_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--witness-key", metavar="VKEY", action="append", default=[],
                        help="a witness's cosignature/v1 key (the vkey or its file; "
                             "repeatable): the newest checkpoint needs --quorum of these")
    parser.add_argument("--quorum", metavar="N", type=int,
                        help="how many distinct --witness-key cosignatures are needed "
                             "(default: all of them)")


def quorum_of(args: argparse.Namespace) -> Quorum | None:
    """The policy the flags give; None when no --witness-key.

    Raises:
        UsageError: --quorum without keys, or more than the keys given.
    """
    if not args.witness_key:
        if args.quorum is not None:
            raise UsageError("--quorum needs the witness keys it counts (--witness-key)")
        return None
    keys = tuple(read_key(k) for k in args.witness_key)
    return Quorum(keys, len(set(keys)) if args.quorum is None else args.quorum)


def settings_of(config: Config) -> CheckpointSettings | None:
    found = getattr(config, "checkpoints", None)
    return found if isinstance(found, CheckpointSettings) else None


def default_private(config: Config) -> Path:
    settings = settings_of(config)
    return Path(settings.private_key) if settings else default_data_dir() / "checkpoint.key"


def public_path(config: Config, given: str | None) -> Path:
    if given:
        return Path(given)
    private = default_private(config)
    return private.with_name(private.name + ".pub")


def witness_dir(config: Config, given: str | None) -> Path:
    if given:
        return Path(given)
    settings = settings_of(config)
    if settings is None:
        raise UsageError("no witness directory: pass --checkpoints DIR or set "
                         "[checkpoints] witness_dir")
    return Path(settings.witness_dir)


async def run(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    """A command that reads or writes the ledger (``ledger`` is open)."""
    command = args.ledger_command
    if command == "checkpoint":
        return await _checkpoint(args, config, ledger)
    if command == "prove":
        return await _prove(args, config, ledger)
    if command == "consistency":
        return await _consistency(args, config, ledger)
    if command == "verify":
        return await _verify(args, config, ledger)
    if command == "disown-seal":
        return await _disown(args, config, ledger)
    raise UsageError(f"unknown command {command}")


def run_offline(args: argparse.Namespace, config: Config) -> int:
    """``keygen`` and ``check-proof``: no ledger."""
    if args.ledger_command == "keygen":
        private = Path(args.private) if args.private else default_private(config)
        public = Path(args.public) if args.public else private.with_name(private.name + ".pub")
        key = signing.write_keys(private, public, args.name)
        print(f"private key {private} (mode 0600: keep it off the ledger's host if you can)")
        print(f"public key  {public}: {key.public.encode()}")
        return EXIT_OK
    verifier = signing.read_public(Path(args.key))
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read {args.file}: {exc}") from exc
    try:
        checked = proofs.check(data, verifier)
    except LedgerIntegrityError as exc:
        print(f"FAILED: {exc}")
        return EXIT_VERIFY
    if args.json:
        print(json.dumps({name: getattr(checked, name) for name in checked.__slots__}))
    elif checked.scope == proofs.TURN:
        state = (f"completed at entry {checked.completed_seq}" if checked.completed_seq
                 else "still in progress at the checkpoint: its later entries are not in it")
        print(f"ok: the whole turn {checked.turn_id}, {checked.entries} entries ({state}), is "
              f"in {checked.origin} as of {checked.size} entries ({checked.time}), signed by "
              f"{checked.key_id}")
    elif checked.scope == proofs.ENTRY:
        print(f"ok: entry {checked.seq} ({checked.kind}, of turn {checked.turn_id}) is in "
              f"{checked.origin} as of {checked.size} entries ({checked.time}), signed by "
              f"{checked.key_id}: one entry, not the rest of its turn")
    elif checked.scope == proofs.ENTRIES:
        print(f"ok, these entries only: {checked.entries} entries of turn {checked.turn_id} "
              f"are in {checked.origin} as of {checked.size} entries ({checked.time}), signed "
              f"by {checked.key_id}; this proof is in the first format "
              f"({proofs.INCLUSION_V1}), which does not say how many entries the turn has, "
              "so it cannot show none was left out: for a proof of the whole turn, make a "
              f"new one (`overt ledger prove {checked.turn_id}`)")
    else:
        print(f"ok: the checkpoint of {checked.size} entries extends the one of "
              f"{checked.old_size} in {checked.origin}, both signed by {checked.key_id}")
    return EXIT_OK


def _private_key(config: Config, given: str | None) -> signing.PrivateKey:
    path = Path(given) if given else default_private(config)
    if not path.exists():
        raise UsageError(f"no private key at {path}: make one with `overt ledger keygen`")
    return signing.read_private(path)


async def _checkpoint(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    key = _private_key(config, args.key)
    settings = settings_of(config) or CheckpointSettings(
        private_key=str(default_private(config)), witness_dir=str(witness_dir(config,
                                                                              args.witness_dir)))
    if args.witness_dir:
        settings = CheckpointSettings(settings.private_key, args.witness_dir, settings.commands,
                                      settings.urls, settings.every_entries,
                                      settings.every_seconds)
    code = EXIT_OK
    try:
        checkpoint, note = await checkpoints.make(ledger, key, settings)
    except checkpoints.SignedWithFindings as exc:
        checkpoint, note, code = exc.checkpoint, exc.note, EXIT_VERIFY
        print(f"FAILED: {exc}", file=sys.stderr)
    except LedgerIntegrityError as exc:
        print(f"FAILED: {exc}")
        return EXIT_VERIFY
    if args.json:
        print(json.dumps({"size": checkpoint.size, "origin": checkpoint.origin,
                          "head": checkpoint.head, "time": checkpoint.time,
                          "pruned": checkpoint.pruned, "note": note}))
    else:
        print(note, end="")
    return code


async def make_after_prune(config: Config, ledger: Any, record: LedgerPruned) -> str | None:
    """After ``overt ledger prune``: sign exactly the range it removed (``record``, its
    own ``ledger.pruned`` entry) in a checkpoint, if a key is set up."""
    settings = settings_of(config)
    if settings is None or not Path(settings.private_key).exists():
        return None
    key = signing.read_private(Path(settings.private_key))
    checkpoint, _ = await checkpoints.make(ledger, key, settings, prune=record)
    return f"signed checkpoint of {checkpoint.size} entries (pruned through {checkpoint.pruned})"


async def check_before_prune(config: Config, ledger: Any) -> None:
    """Before ``overt ledger prune``: refuse to prune over a ``ledger.pruned`` entry that no
    prune wrote, unless the checkpoint key disowned it (``overt ledger disown-seal``).

    Raises:
        LedgerIntegrityError: there is one.
    """
    found = await proofs_reads.forged_seals(ledger)
    if not found:
        return
    settings = settings_of(config)
    disowned: dict[int, str] = {}
    if settings is not None and Path(settings.private_key).exists():
        key = signing.read_private(Path(settings.private_key)).public
        origin, _ = await _origin(ledger)
        disowned = checkpoints.read_disowned(Path(settings.witness_dir), key, origin)
    left = [s for s in found if disowned.get(s.seq) != s.hash]
    if left:
        raise LedgerIntegrityError(
            "; ".join(s.text() for s in left) + ". Nothing was pruned. Someone who can write "
            "to the database appended it: keep the ledger as it is (the entry is evidence), "
            "find out who, and run `overt ledger verify --checkpoints`. Then `overt ledger "
            f"disown-seal {left[0].seq}` signs, with the checkpoint key, that it is not a "
            "prune of yours, and prunes go on")


async def _origin(ledger: Any) -> tuple[str, int]:
    """The ledger's origin (from entry 1, or the stored leaf standing in for it) and the
    seq it is pruned through."""
    return await proofs_reads.origin(ledger)


async def _disown(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    key = _private_key(config, args.key)
    directory = witness_dir(config, args.witness_dir)
    found = {s.seq: s for s in await proofs_reads.forged_seals(ledger)}
    seal = found.get(args.seq)
    if seal is None:
        raise UsageError(f"entry {args.seq} is not a ledger.pruned entry that no prune wrote "
                         "(`overt ledger verify --checkpoints` names any there is)")
    origin, _ = await _origin(ledger)
    path = checkpoints.write_disowned(directory, key, origin, seal.seq, seal.hash)
    print(f"disowned: {seal.text()}")
    print(f"signed by {key.public.key_id} in {path}")
    return EXIT_OK


def _newest(directory: Path, key: signing.PublicKey) -> tuple[str, Checkpoint]:
    found, _ = checkpoints.read_witness_dir(directory, key)
    if not found:
        raise UsageError(f"no checkpoint signed by {key.key_id} in {directory}: make one "
                         "with `overt ledger checkpoint`")
    path, checkpoint = found[-1]
    return path.read_text(encoding="utf-8"), checkpoint


async def _prove(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    if (args.turn_id is None) == (args.entry is None):
        raise UsageError("prove a turn (TURN_ID) or one entry (--entry SEQ), not both")
    key = signing.read_public(public_path(config, args.key))
    directory = witness_dir(config, args.checkpoints)
    note, checkpoint = _newest(directory, key)
    if args.entry is not None:
        last = args.entry
    else:
        entries = await ledger.entries(turn_id=args.turn_id)
        last = entries[-1].seq if entries else 0
    settings = settings_of(config)
    if last > checkpoint.size and settings is not None \
            and Path(settings.witness_dir) == directory:
        # the turn is newer than the newest checkpoint: sign one that holds it
        try:
            checkpoint, note = await checkpoints.make(ledger, _private_key(config, None),
                                                      settings)
        except checkpoints.SignedWithFindings as exc:
            checkpoint, note = exc.checkpoint, exc.note
            print(f"overt: {exc}", file=sys.stderr)
    found: list[str] = []
    try:
        if args.entry is not None:
            proof = await proofs.prove_entry(ledger, args.entry, note, checkpoint, key,
                                             found=found)
        else:
            proof = await proofs.prove(ledger, args.turn_id, note, checkpoint, key, found=found)
    except LedgerIntegrityError as exc:  # the ledger disagrees with its checkpoint
        print(f"FAILED: {exc}", file=sys.stderr)
        return EXIT_VERIFY
    for line in found:  # the proof is right; the stored tree is not
        print(f"overt: {line}; run `overt ledger verify --checkpoints`", file=sys.stderr)
    sys.stdout.write(proofs.dump(proof))
    return EXIT_OK


def _read_note(path: str, key: signing.PublicKey) -> tuple[str, Checkpoint]:
    try:
        note = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"cannot read {path}: {exc}") from exc
    return note, Checkpoint.open(note, key)


async def _consistency(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    key = signing.read_public(public_path(config, args.key))
    try:
        old, new = _read_note(args.old, key), _read_note(args.new, key)
        proof = await proofs.consistency(ledger, old, new, key)
    except LedgerIntegrityError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return EXIT_VERIFY
    sys.stdout.write(proofs.dump(proof))
    return EXIT_OK


async def _verify(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    from overt.cli import render

    key = signing.read_public(public_path(config, args.key))
    directory = witness_dir(config, args.checkpoints)
    if not directory.is_dir():
        raise LedgerError(f"no witness directory {directory}")
    found, unsigned = checkpoints.read_witness_dir(directory, key)
    chain = await ledger.verify()
    report = await audit.verify_against(ledger, chain, [c for _, c in found],
                                        witness_dir=directory, key=key)
    forged = [f"{p}: {why}" for p, why in unsigned if isinstance(why, ForgedSignatureError)]
    changes: dict[str, Any] = {"unsigned": [f"{p}: {why}" for p, why in unsigned
                                            if not isinstance(why, ForgedSignatureError)]}
    problems = []
    if forged:  # one of the key's checkpoints altered: not a file to pass over
        problems.append("a checkpoint bears the key's signature but was altered or forged: "
                        + "; ".join(forged))
    missing = await audit.witness_findings(ledger, key, found, unsigned)
    conflicts = await audit.witness_conflicts(ledger, directory, key)
    problems += [c.text() for c in conflicts]
    policy = quorum_of(args)
    if policy is not None and found:
        newest = found[-1][1]
        counted = check_quorum(newest.text(), read_cosignatures(directory, newest.size),
                               policy)
        changes["notes"] = [*report.notes, f"cosigned by {', '.join(counted.cosigned) or 'none'}"
                            f" ({len(counted.cosigned)} of {policy.needed} needed)"]
        if not counted.ok:
            problems.append(f"the newest checkpoint ({newest.size} entries): "
                            + counted.problem())
    elif policy is not None:
        problems.append("no signed checkpoint to hold to the witness quorum")
    if missing and args.allow_missing:
        changes["notes"] = [*changes.get("notes", report.notes),
                            *(f"allowed missing: {m}" for m in missing)]
    elif missing:
        problems.append("; ".join(missing) + " (pass --allow-missing to name these and go on)")
    if problems:
        problem = "; ".join(problems)
        changes.update(ok=False, problem=problem if report.ok
                       else f"{report.problem}; {problem}")
    report = audit.CheckpointReport(**{**{n: getattr(report, n) for n in report.__slots__},
                                       **changes})
    if args.json:
        out = {n: getattr(report, n) for n in report.__slots__ if n != "chain"}
        out["chain"] = {n: getattr(chain, n) for n in chain.__slots__}
        print(json.dumps(out, indent=2))
    else:
        print(render.verify_text(chain))
        for line in report.unsigned:
            print(f"not signed by {key.key_id}, ignored: {line}")
        for line in report.notes:
            print(line)
        if report.ok:
            print(f"ok: against {report.checkpoints} signed checkpoints, the newest of "
                  f"{report.newest_size} entries ({report.newest_time}); {report.checked} "
                  f"recomputed, {report.inside_pruned} inside the pruned prefix")
        else:
            print(f"FAILED against the signed checkpoints: {report.problem}")
        for c in conflicts:  # both checkpoints, each signed by the log's key
            print(f"\n== the checkpoint {', '.join(c.witnesses)} cosigned:\n{c.held_note}"
                  f"== the checkpoint it refused:\n{c.sent_note}", end="")
    return EXIT_OK if report.ok else EXIT_VERIFY
