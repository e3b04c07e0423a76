"""Global flags (``--db``, ``--config``, ...) are taken after the command too, at any
depth; a flag taking one value given on both sides with different values is an error."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from overt.cli import global_flags
from overt.cli.main import _parser, main

COMMANDS = [["ask", "a question"], ["runs"], ["ledger", "verify"], ["sessions", "show", "cli:x"],
            ["approvals", "approve", "01K0000000000000000000000A"], ["config", "show"],
            ["memory", "search", "words"]]
VALUES = {"value": ["X"], "switch": [], "repeat": ["X"]}


def _parsed(argv: list[str]) -> argparse.Namespace:
    parser = _parser()
    return global_flags.merge(parser, parser.parse_args(argv))


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("flag", global_flags.FLAGS, ids=lambda f: f.names[-1])
def test_every_global_flag_after_the_command_is_the_same_as_before_it(
        flag: global_flags.Flag, command: list[str]) -> None:
    for name in flag.names:
        given = [name, *VALUES[flag.kind]]
        before, after = _parsed([*given, *command]), _parsed([*command, *given])
        assert vars(before) == vars(after)
        assert getattr(after, flag.dest) not in (None, False, [])


def test_repeatable_flags_add_up_from_both_sides_and_switches_hold_from_either() -> None:
    args = _parsed(["--enable-plugin", "a", "-v", "ask", "q", "--enable-plugin", "b",
                    "--read-only"])
    assert args.enable_plugin == ["a", "b"]
    assert args.verbose and args.read_only


def test_a_value_flag_given_before_and_after_with_different_values_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--db", "one.db", "ledger", "verify", "--db", "two.db"])
    assert exited.value.code == 2
    assert "--db was given before the command (one.db) and after it (two.db)" in \
        capsys.readouterr().err
    assert _parsed(["--db", "same.db", "runs", "--db", "same.db"]).db == "same.db"


def test_ask_then_verify_with_db_after_the_command_use_that_ledger(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "after.db"
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"text": "an answer"}\n')
    assert main(["ask", "a question", "--model", f"scripted:{replies}", "--json",
                 "--db", str(db)]) == 0
    turn = json.loads(capsys.readouterr().out)["turn_id"]
    assert main(["show", turn, "--db", str(db)]) == 0
    assert turn in capsys.readouterr().out
    assert main(["ledger", "verify", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["ledger", "--db", str(db), "verify"]) == 0
    assert "ok:" in capsys.readouterr().out


def test_config_and_read_only_after_the_command_take_effect(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "from-config.db"
    config = tmp_path / "overt.toml"
    config.write_text(f'db = "{db}"\n')
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"text": "an answer"}\n')
    assert main(["ask", "q", "--model", f"scripted:{replies}", "--config", str(config)]) == 0
    assert db.exists()
    capsys.readouterr()
    assert main(["runs", "--json", "--config", str(config)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    # --read-only after the command: the turn cannot be recorded, so nothing runs
    assert main(["ask", "q", "--model", f"scripted:{replies}", "--config", str(config),
                 "--read-only"]) != 0
    capsys.readouterr()
    assert main(["runs", "--json", "--config", str(config)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
