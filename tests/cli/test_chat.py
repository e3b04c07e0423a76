from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_chat_keeps_one_session_and_its_history_across_turns(tmp_path: Path) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text('{"text": "Hello, operator."}\n{"text": "You said hi before."}\n')
    db = tmp_path / "l.db"
    out = subprocess.run(
        [sys.executable, "-m", "overt.cli.main", "--db", str(db), "chat", "--model",
         f"scripted:{script}"],
        input="hi\nwhat did I say?\n\n", capture_output=True, text=True, timeout=60, check=True)
    assert "overt> Hello, operator." in out.stdout
    assert "overt> You said hi before." in out.stdout
    import sqlite3

    sessions = sqlite3.connect(db).execute(
        "SELECT DISTINCT session_id FROM audit_log WHERE kind = 'turn.started'").fetchall()
    assert len(sessions) == 1 and sessions[0][0].startswith("cli:")
