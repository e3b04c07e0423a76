"""What ``overt chat`` and ``overt ask`` do with input a terminal user does not type:
piped lines, blank lines, bytes that are not UTF-8."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPLIES = '{"text": "First answer."}\n{"text": "Second answer."}\n'


def overt(tmp_path: Path, *args: str | bytes,
          stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "replies.jsonl"
    script.write_text(REPLIES)
    return subprocess.run(
        [sys.executable, "-m", "overt.cli.main", "--db", str(tmp_path / "l.db"), *args,
         "--model", f"scripted:{script}"],
        input=stdin, capture_output=True, timeout=60, check=False)


def messages(tmp_path: Path) -> int:
    return sqlite3.connect(tmp_path / "l.db").execute(
        "SELECT count(*) FROM audit_log WHERE kind = 'turn.started'").fetchone()[0]


@pytest.mark.slow
def test_a_blank_line_in_piped_input_does_not_drop_the_questions_after_it(
        tmp_path: Path) -> None:
    out = overt(tmp_path, "chat", stdin=b"first question\n\nsecond question\n")
    assert out.returncode == 0, out.stderr
    assert b"overt> First answer." in out.stdout and b"overt> Second answer." in out.stdout
    assert b"the end of the input ends" in out.stderr
    assert messages(tmp_path) == 2


@pytest.mark.slow
def test_a_piped_line_that_is_not_utf8_stops_the_chat_with_exit_2_and_is_not_sent(
        tmp_path: Path) -> None:
    out = overt(tmp_path, "chat", stdin=b"first question\ncaf\xe9 au lait?\nthird\n")
    assert out.returncode == 2
    assert (b"overt: the text is not valid UTF-8 at character 3 (the byte 0xe9): nothing "
            b"was sent") in out.stderr
    assert out.stdout.count(b"overt> ") == 1 and messages(tmp_path) == 1


@pytest.mark.slow
def test_a_question_that_is_not_utf8_is_refused_before_any_turn(tmp_path: Path) -> None:
    out = overt(tmp_path, "ask", b"caf\xe9?")  # what a Latin-1 terminal passes
    assert out.returncode == 2
    assert b"not valid UTF-8 at character 3 (the byte 0xe9)" in out.stderr
    assert not (tmp_path / "l.db").exists() or messages(tmp_path) == 0


@pytest.mark.slow
def test_a_chat_started_with_stdin_closed_says_so_with_exit_2(tmp_path: Path) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text(REPLIES)
    out = subprocess.run(
        ["sh", "-c", 'exec "$0" -m overt.cli.main --db "$1" chat --model "$2" <&-',
         sys.executable, str(tmp_path / "l.db"), f"scripted:{script}"],
        capture_output=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert out.stderr == (b"overt: overt chat reads what you say from standard input, "
                          b"which is closed; use overt ask TEXT\n")
