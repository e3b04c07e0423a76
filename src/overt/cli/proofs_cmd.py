"""``overt ledger keygen | checkpoint | prove | check-proof | consistency`` and
``ledger verify --checkpoints DIR --key PUB``: signed checkpoints and Merkle proofs
(see :mod:`overt.ledger.checkpoints`, :mod:`overt.ledger.proofs`).

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
from overt.ledger import audit, checkpoints, proofs, signing
from overt.ledger.checkpoints import Checkpoint, CheckpointSettings

COMMANDS = ("keygen", "checkpoint", "prove", "check-proof", "consistency")
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
    prove = lsub.add_parser("prove", help="a turn's entries with their Merkle inclusion "
                            "proofs and a signed checkpoint, as JSON (check it offline)")
    prove.add_argument("turn_id", type=flags.turn_id)
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


def add_verify_flags(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("--checkpoints", metavar="DIR",
                        help="also check the ledger against the signed checkpoints in DIR "
                             "(a truncated tail, a re-computed chain, a forged prune)")
    verify.add_argument("--key", metavar="PUBLIC", help="the public key checkpoints are "
                        "signed with (with --checkpoints)")


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
    elif checked.format == proofs.INCLUSION:
        print(f"ok: {checked.entries} entries of turn {checked.turn_id} are in {checked.origin} "
              f"as of {checked.size} entries ({checked.time}), signed by {checked.key_id}")
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
    try:
        checkpoint, note = await checkpoints.make(ledger, key, settings)
    except LedgerIntegrityError as exc:
        print(f"FAILED: {exc}")
        return EXIT_VERIFY
    if args.json:
        print(json.dumps({"size": checkpoint.size, "origin": checkpoint.origin,
                          "head": checkpoint.head, "time": checkpoint.time,
                          "pruned": checkpoint.pruned, "note": note}))
    else:
        print(note, end="")
    return EXIT_OK


async def make_after_prune(config: Config, ledger: Any) -> str | None:
    """After ``overt ledger prune``: sign the prune in a checkpoint, if a key is set up."""
    settings = settings_of(config)
    if settings is None or not Path(settings.private_key).exists():
        return None
    key = signing.read_private(Path(settings.private_key))
    checkpoint, _ = await checkpoints.make(ledger, key, settings, allow_prune=True)
    return f"signed checkpoint of {checkpoint.size} entries (pruned through {checkpoint.pruned})"


def _newest(directory: Path, key: signing.PublicKey) -> tuple[str, Checkpoint]:
    found, _ = checkpoints.read_witness_dir(directory, key)
    if not found:
        raise UsageError(f"no checkpoint signed by {key.key_id} in {directory}: make one "
                         "with `overt ledger checkpoint`")
    path, checkpoint = found[-1]
    return path.read_text(encoding="utf-8"), checkpoint


async def _prove(args: argparse.Namespace, config: Config, ledger: Any) -> int:
    key = signing.read_public(public_path(config, args.key))
    directory = witness_dir(config, args.checkpoints)
    note, checkpoint = _newest(directory, key)
    entries = await ledger.entries(turn_id=args.turn_id)
    settings = settings_of(config)
    if entries and entries[-1].seq > checkpoint.size and settings is not None \
            and Path(settings.witness_dir) == directory:
        # the turn is newer than the newest checkpoint: sign one that holds it
        checkpoint, note = await checkpoints.make(ledger, _private_key(config, None), settings)
    try:
        proof = await proofs.prove(ledger, args.turn_id, note, checkpoint, key)
    except LedgerIntegrityError as exc:  # the ledger disagrees with its checkpoint
        print(f"FAILED: {exc}", file=sys.stderr)
        return EXIT_VERIFY
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
    report = await audit.verify_against(ledger, chain, [c for _, c in found])
    forged = [f"{p}: {why}" for p, why in unsigned if isinstance(why, ForgedSignatureError)]
    changes: dict[str, Any] = {"unsigned": [f"{p}: {why}" for p, why in unsigned
                                            if not isinstance(why, ForgedSignatureError)]}
    if forged:  # one of the key's checkpoints altered: not a file to pass over
        problem = ("a checkpoint bears the key's signature but was altered or forged: "
                   + "; ".join(forged))
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
        if report.ok:
            print(f"ok: against {report.checkpoints} signed checkpoints, the newest of "
                  f"{report.newest_size} entries ({report.newest_time}); {report.checked} "
                  f"recomputed, {report.inside_pruned} inside the pruned prefix")
        else:
            print(f"FAILED against the signed checkpoints: {report.problem}")
    return EXIT_OK if report.ok else EXIT_VERIFY
