"""`overt ask` on a terminal prints the answer as it is generated; off a terminal, as before."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from overt.cli.stream_out import TerminalAnswer, columns, rows
from overt.engine.answer_stream import AnswerDelta, AnswerReset

SRC = str(Path(__file__).resolve().parents[2] / "src")
PREAMBLE_THEN_ANSWER = (
    '{"text": "Let me check.", "tool_calls": [{"name": "get_usage", '
    '"arguments": {"period": "today"}}]}\n'
    '{"text": "You used 0 tokens today."}\n')


def on_a_terminal(*args: str) -> str:
    """Run ``overt ARGS`` with standard output on a pseudo-terminal; what it wrote there."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "80", "LINES": "24"}
    process = subprocess.Popen([sys.executable, "-m", "overt.cli.main", *args],
                               stdin=subprocess.DEVNULL, stdout=slave,
                               stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.slow
def test_on_a_terminal_the_preamble_to_a_tool_call_is_erased_and_the_answer_stays(
    tmp_path: Path
) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text(PREAMBLE_THEN_ANSWER)
    out = on_a_terminal("--db", str(tmp_path / "l.db"), "ask", "burn?", "--model",
                        f"scripted:{script}")
    assert out.startswith("Let me check.")  # shown while the model wrote it
    assert "\r\x1b[J" in out  # then erased when it called a tool
    assert out.endswith("\x1b[JYou used 0 tokens today.\n")


@pytest.mark.slow
def test_no_stream_on_a_terminal_prints_the_answer_once(tmp_path: Path) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text(PREAMBLE_THEN_ANSWER)
    out = on_a_terminal("--db", str(tmp_path / "l.db"), "ask", "burn?", "--model",
                        f"scripted:{script}", "--no-stream")
    assert out == "You used 0 tokens today.\n"


def test_a_withdrawn_answer_is_erased_row_by_row() -> None:
    out = io.StringIO()
    screen = TerminalAnswer(out, "overt> ")
    screen(AnswerDelta("line one\nline two"))
    screen(AnswerReset("tool_call"))
    screen(AnswerDelta("done"))
    screen.finish("done")
    assert out.getvalue() == "overt> line one\nline two\x1b[1F\x1b[Jovert> done\n"


def test_wide_characters_take_two_columns_when_rows_are_counted() -> None:
    assert columns("東京のサーバー") == 14 and columns("abc") == 3
    assert rows("東京" * 20, 80) == 1 and rows("東京" * 20 + "x", 80) == 2  # 80 columns
    assert rows("a\n\nb", 80) == 3
