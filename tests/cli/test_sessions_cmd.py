"""``overt ask --session``, ``overt chat --resume`` and ``overt sessions``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.cli.main import main
from overt.models.fake import ScriptedModel
from overt.types import ModelRequest, ModelResponse


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[ModelRequest]:
    """Every request a scripted model is sent in this process."""
    seen: list[ModelRequest] = []
    original = ScriptedModel.complete

    async def complete(self: ScriptedModel, request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return await original(self, request)

    monkeypatch.setattr(ScriptedModel, "complete", complete)
    return seen


def _script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps({"text": r}) + "\n" for r in replies))
    return f"scripted:{path}"


def _ask(db: Path, model: str, text: str, *extra: str) -> int:
    return main(["--db", str(db), "ask", text, "--model", model, *extra])


def _session_of(err: str) -> str:
    line = next(x for x in err.splitlines() if "continue it with --session" in x)
    return line.rsplit("--session ", 1)[1].rstrip(")")


def test_ask_with_session_continues_it_with_the_earlier_exchange(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], requests: list[ModelRequest],
) -> None:
    db = tmp_path / "l.db"
    assert _ask(db, _script(tmp_path, "Noted: the host is Isokron."), "The host is Isokron.") == 0
    session = _session_of(capsys.readouterr().err)
    assert session.startswith("cli:")
    assert _ask(db, _script(tmp_path, "Isokron."), "Which host?", "--session", session) == 0
    history = [(m.role, m.content) for m in requests[-1].messages if m.role != "system"]
    assert history == [("user", "The host is Isokron."),
                       ("assistant", "Noted: the host is Isokron."), ("user", "Which host?")]


def test_ask_with_an_unknown_session_exits_4_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], requests: list[ModelRequest],
) -> None:
    assert _ask(tmp_path / "l.db", _script(tmp_path, "x"), "hi", "--session", "cli:nope") == 4
    assert "no session 'cli:nope'" in capsys.readouterr().err
    assert requests == []


@pytest.mark.slow
def test_sessions_lists_and_shows_a_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "l.db"
    _ask(db, _script(tmp_path, "first answer"), "first question")
    session = _session_of(capsys.readouterr().err)
    _ask(db, _script(tmp_path, "second answer"), "second question", "--session", session)
    capsys.readouterr()
    assert main(["--db", str(db), "sessions", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(s["session_id"], s["channel"], s["owner"], s["turns"], s["title"])
            for s in listed] == [(session, "cli", "operator:default", 2, "first question")]
    assert main(["--db", str(db), "sessions", "show", session]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[1:] == ["you> first question", "overt> first answer",
                         "you> second question", "overt> second answer"]
    assert main(["--db", str(db), "sessions", "show", "cli:missing"]) == 4


def _chat(db: Path, model: str, typed: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "overt.cli.main", "--db", str(db), "chat", "--model", model,
         *extra], input=typed, capture_output=True, text=True, timeout=60, check=True)


def _turns(db: Path) -> list[Any]:
    import sqlite3

    return sqlite3.connect(db).execute(
        "SELECT session_id FROM audit_log WHERE kind = 'turn.started' ORDER BY seq").fetchall()


@pytest.mark.slow
def test_chat_resume_takes_up_the_last_session_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    _chat(db, _script(tmp_path, "Hello."), "hi\n\n")
    resumed = _chat(db, _script(tmp_path, "Welcome back."), "again\n\n", "--resume")
    assert "resuming session cli:" in resumed.stderr and "(1 turns so far" in resumed.stderr
    sessions = _turns(db)
    assert len(sessions) == 2 and sessions[0] == sessions[1]
    named = _chat(db, _script(tmp_path, "Third."), "more\n\n", "--resume", sessions[0][0])
    assert "(2 turns so far" in named.stderr


@pytest.mark.slow
def test_chat_resume_with_nothing_to_resume_exits_4(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "overt.cli.main", "--db", str(tmp_path / "l.db"), "chat",
         "--model", _script(tmp_path, "x"), "--resume"], input="hi\n\n", capture_output=True,
        text=True, timeout=60)
    assert out.returncode == 4 and "no earlier command-line session" in out.stderr
