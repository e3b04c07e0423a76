"""``overt witness keygen | serve | evidence``: a standalone C2SP witness (see
:mod:`overt.witness`).

Exit codes: 0 ok; 2 usage (a bad key or flag); 3 ``evidence`` found refused
checkpoints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from overt.errors import UsageError
from overt.ledger.signing import PublicKey, read_public, write_key_files
from overt.witness.notes import WitnessSigner
from overt.witness.server import make_server
from overt.witness.state import WitnessState

COMMANDS = ("witness",)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    witness = sub.add_parser("witness", help="a standalone witness that cosigns checkpoints "
                             "(C2SP tlog-witness)")
    wsub = witness.add_subparsers(dest="witness_command", required=True)
    keygen = wsub.add_parser("keygen", help="make the witness's cosigning key pair")
    keygen.add_argument("--name", required=True, help="the witness's name, e.g. "
                        "witness.example.com/w1")
    keygen.add_argument("--private", metavar="PATH", required=True,
                        help="the private key file (mode 0600)")
    keygen.add_argument("--public", metavar="PATH", help="the vkey file (default: the "
                        "private key's path + .pub)")
    serve = wsub.add_parser("serve", help="answer POST /add-checkpoint")
    serve.add_argument("--key", metavar="PRIVATE", required=True, help="the witness's "
                       "private key file")
    serve.add_argument("--state", metavar="PATH", required=True, help="the witness's "
                       "SQLite file (latest size and root per log)")
    serve.add_argument("--log", nargs=2, metavar=("ORIGIN", "PUBLIC"), action="append",
                       default=[], required=True, help="a log to witness: its origin line "
                       "and its public key file (repeatable)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8476)
    evidence = wsub.add_parser("evidence", help="the checkpoints refused, each beside the "
                               "cosigned one it conflicts with")
    evidence.add_argument("--state", metavar="PATH", required=True)


def run(args: argparse.Namespace) -> int:
    if args.witness_command == "keygen":
        return _keygen(Path(args.private), Path(args.public or args.private + ".pub"),
                       args.name)
    if args.witness_command == "serve":
        return _serve(args)
    return _evidence(Path(args.state))


def _keygen(private: Path, public: Path, name: str) -> int:
    signer = WitnessSigner.generate(name)
    write_key_files(private, public, signer.encode(), signer.public.encode())
    print(signer.public.encode())
    return 0


def _read_signer(path: Path) -> WitnessSigner:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the witness key {path}: {exc}") from exc
    if mode & 0o077:
        raise UsageError(f"the witness key {path} is readable by others: chmod 600 it")
    return WitnessSigner.parse(text)


def _serve(args: argparse.Namespace) -> int:
    signer = _read_signer(Path(args.key))
    logs: dict[str, PublicKey] = {}
    for origin, public in args.log:
        logs[origin] = read_public(Path(public))
    state = WitnessState(Path(args.state))
    server = make_server(args.host, args.port, logs, signer, state)
    print(f"witness {signer.public.label} on http://{args.host}:{server.server_port}",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        state.close()
    return 0


def _evidence(path: Path) -> int:
    if not path.exists():
        raise UsageError(f"no witness state at {path}")
    state = WitnessState(path)
    try:
        found = state.evidence()
    finally:
        state.close()
    for item in found:
        print(f"== {item.kind} of {item.origin} refused at {item.refused_at}")
        print("-- cosigned:")
        sys.stdout.write(item.held_note)
        print("-- refused:")
        sys.stdout.write(item.refused_note)
    return 3 if found else 0
