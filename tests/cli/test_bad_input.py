"""Bad input on the command line is a usage error with a clear message, never a
traceback: every argument that names a session, turn, approval request, memory
node, eval case or actor is checked as the command line is read, and JSON handed
to overt is parsed with a depth limit."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.cli import flags
from overt.cli.global_flags import _commands
from overt.cli.main import _parser, main
from overt.ledger.proofs import dump
from tests.ledger.proofs_helpers import add_turns

NOT_UTF8 = os.fsdecode(b"cli:\xff\xfe")
"""What bytes that are not UTF-8 become in ``sys.argv`` (lone surrogates)."""
BAD_IDS = {"not utf-8": NOT_UTF8, "too long": "x" * 5000, "control character": "a\nb",
           "nul": "a\x00b"}
ID = "{id}"

ID_COMMANDS = [
    ["ask", "a question", "--session", ID],
    ["chat", "--resume", ID],
    ["show", ID],
    ["trail", ID],
    ["export", ID],
    ["sessions", "show", ID],
    ["ledger", "export", "--session", ID],
    ["ledger", "prove", ID],
    ["approvals", "show", ID],
    ["approvals", "approve", ID],
    ["approvals", "deny", ID, "--reason", "no"],
    ["memory", "show", ID],
    ["memory", "history", ID],
    ["memory", "graph", ID],
    ["eval", "--case", ID],
    ["trail", "cli:s", "--as", ID],
    ["export", "cli:s", "--as", ID],
    ["approvals", "approve", "r1", "--as", ID],
    ["sessions", "--owner", ID],
    ["memory", "search", "words", "--actor", ID],
    ["serve", "--add-token", ID],
    ["mcp", "--actor", ID],
]
"""Every argument of ``overt`` that names something on the record or an actor."""


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "l.db")
    assert main(["--db", path, "ledger", "migrate"]) == 0
    return path


@pytest.mark.slow
@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
@pytest.mark.parametrize("argv", ID_COMMANDS, ids=lambda a: " ".join(a).replace(ID, "ID"))
def test_a_bad_id_is_a_usage_error_naming_the_argument(
        db: str, argv: list[str], bad: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"text": "an answer"}\n')
    command = [bad if a == ID else a for a in argv]
    if command[0] in ("ask", "chat", "eval", "mcp"):
        command += ["--model", f"scripted:{replies}"]
    with pytest.raises(SystemExit) as exited:
        main(["--db", db, *command])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument" in err and ("id" in err or "actor" in err), err
    assert main(["--db", db, "ledger", "verify"]) == 0  # nothing was recorded half-way


def test_every_argument_that_names_an_id_or_an_actor_is_checked() -> None:
    """The list above is every such argument: an argument whose name or metavar says
    id, session or actor has a checking type (a new one is caught here)."""
    roles = {"overt ledger setup-roles owner"}  # a PostgreSQL role, not an overt actor
    checking = {flags.session_id, flags.session_id_or_last, flags.turn_id, flags.request_id,
                flags.node_id, flags.turn_or_session_id, flags.case_id, flags.actor}
    unchecked = []
    for command in _commands(_parser()):
        for action in command._actions:
            names = " ".join([action.dest, str(action.metavar or "")]).lower()
            if (any(w in names for w in ("id", "session", "actor", "owner", "as_actor"))
                    and action.nargs != 0 and not action.dest.startswith("after_command_")
                    and not isinstance(action, argparse._SubParsersAction)
                    and action.type not in checking
                    and f"{command.prog} {action.dest}" not in roles):
                unchecked.append(f"{command.prog} {action.dest}")
    assert unchecked == []


@pytest.mark.slow
def test_an_id_that_is_not_utf8_on_a_real_command_line_is_exit_2_without_a_traceback(
        db: str) -> None:
    for argv in ([b"show", b"\xff\xfe"], [b"sessions", b"show", b"cli:\xff"],
                 [b"approvals", b"approve", b"\xc3"]):
        done = subprocess.run([sys.executable, "-m", "overt.cli", "--db", db.encode(), *argv],
                              capture_output=True, text=True, errors="replace")
        assert done.returncode == 2, (argv, done.stderr)
        assert "Traceback" not in done.stderr
        assert "an id is valid UTF-8 text; character" in done.stderr, done.stderr


DEEP = "[" * 50_000 + "]" * 50_000


def test_check_proof_on_deeply_nested_json_fails_as_not_a_proof(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "key"
    assert main(["ledger", "keygen", "--private", str(key)]) == 0
    proof = tmp_path / "proof.json"
    proof.write_text(DEEP)
    assert main(["ledger", "check-proof", str(proof), "--key", f"{key}.pub"]) == 3
    assert "not a proof: the proof nests 50000 levels deep" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("where", ["eval cases", "scripted replies", "tokens file"])
def test_other_json_handed_to_overt_nested_too_deep_is_a_usage_error(
        where: str, db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' + DEEP + "}\n")
    argv = {"eval cases": ["eval", "--cases", str(deep), "--model", "scripted:/dev/null"],
            "scripted replies": ["ask", "q", "--model", f"scripted:{deep}"],
            "tokens file": ["serve", "--tokens", str(deep)]}[where]
    assert main(["--db", db, *argv]) == 2
    assert "nests 50001 levels deep, deeper than the 128 overt reads" in \
        capsys.readouterr().err


def test_check_proof_of_an_entry_whose_data_nests_deeply_fails_as_not_a_proof(
        ledger: Any, ledger_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    add_turns(ledger, 3)
    key, witness = tmp_path / "k", tmp_path / "witness"
    db = ["--db", ledger_url, "ledger"]
    assert main([*db, "keygen", "--private", str(key)]) == 0
    assert main([*db, "checkpoint", "--key", str(key), "--witness-dir", str(witness)]) == 0
    capsys.readouterr()
    assert main([*db, "prove", "t1", "--checkpoints", str(witness), "--key",
                 f"{key}.pub"]) == 0
    proof = json.loads(capsys.readouterr().out)
    proof["entries"][0]["data"] = DEEP  # a string holding JSON nested 50,000 deep
    path = tmp_path / "proof.json"
    path.write_text(dump(proof))
    assert main(["ledger", "check-proof", str(path), "--key", f"{key}.pub"]) == 3
    assert "the entry's data nests 50000 levels deep" in capsys.readouterr().out
