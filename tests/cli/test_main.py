from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from overt.cli.main import main


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "replies.jsonl"
    path.write_text(
        '# a model that checks the burn, then answers\n'
        '{"tool_calls": [{"name": "get_usage", "arguments": {"period": "today"}}]}\n'
        '\n'
        '{"text": "You used 0 tokens today."}\n'
    )
    return path


def _ask(db: Path, script: Path, *extra: str) -> int:
    return main(["--db", str(db), "ask", "what's my burn?", "--model", f"scripted:{script}",
                 *extra])


def test_ask_prints_the_answer(tmp_path: Path, script: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert _ask(tmp_path / "l.db", script) == 0
    assert capsys.readouterr().out.strip() == "You used 0 tokens today."


def test_ask_json_prints_the_response_result(tmp_path: Path, script: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert _ask(tmp_path / "l.db", script, "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tools_used"] == ["get_usage"] and result["error"] is None
    assert result["session_id"].startswith("cli:") and len(result["turn_id"]) == 26
    assert set(result["usage"]) == {"input_tokens", "output_tokens", "cost_usd"}


def test_ask_exits_1_when_the_turn_ends_in_a_model_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert _ask(tmp_path / "l.db", empty, "--json") == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "model_error" and "no scripted reply left" in error["message"]


def test_a_malformed_scripted_file_is_a_usage_error_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": 42}\n')
    assert _ask(tmp_path / "l.db", bad) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err


@pytest.mark.slow
def test_runs_and_show_read_the_turn_back(tmp_path: Path, script: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.db"
    _ask(db, script, "--json")
    turn_id = json.loads(capsys.readouterr().out)["turn_id"]
    assert main(["--db", str(db), "runs"]) == 0
    assert turn_id in capsys.readouterr().out
    assert main(["--db", str(db), "show", turn_id]) == 0
    shown = capsys.readouterr().out
    assert "inference #0" in shown and "get_usage -> ok" in shown and "what's my burn" not in shown
    assert main(["--db", str(db), "show", turn_id, "--content"]) == 0
    shown = capsys.readouterr().out
    assert "message: what's my burn?" in shown and "reply: You used 0 tokens today." in shown
    assert main(["--db", str(db), "show", turn_id, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["entries"]) == 8  # with the decision and step


def test_show_of_an_unknown_turn_exits_4(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(tmp_path / "l.db"), "ledger", "migrate"]) == 0
    assert main(["--db", str(tmp_path / "l.db"), "show", "NOPE"]) == 4
    assert "no turn" in capsys.readouterr().err


def _verify_after(db: Path, capsys: pytest.CaptureFixture[str],
                  *statements: str) -> tuple[int, str]:
    """`ledger verify`'s exit code and output once ``statements`` changed ``db`` as
    someone with database access could."""
    conn = sqlite3.connect(db, isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()
    code = main(["--db", str(db), "ledger", "verify"])
    return code, capsys.readouterr().out


def test_ledger_schema_prints_the_committed_events_schema_without_opening_a_ledger(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.db"
    assert main(["--db", str(db), "ledger", "schema"]) == 0
    committed = Path(__file__).resolve().parents[2] / "docs" / "reference" / "events.schema.json"
    assert capsys.readouterr().out == committed.read_text(encoding="utf-8")
    assert not db.exists()


def test_ledger_verify_exits_0_then_3_after_tampering(
    tmp_path: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    _ask(db, script)
    capsys.readouterr()
    assert main(["--db", str(db), "ledger", "verify"]) == 0
    assert capsys.readouterr().out.startswith("ok: 9 entries verified")
    code, out = _verify_after(db, capsys, "DROP TRIGGER audit_log_no_update",
                              "UPDATE audit_log SET data = replace(data, 'get_usage', "
                              "'get_usagf') WHERE kind = 'tool_call.completed'")
    assert code == 3
    assert "FAILED at entry seq 6" in out


def test_ledger_verify_exits_3_when_the_trail_index_disagrees_with_the_chain(
    tmp_path: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    _ask(db, script)
    capsys.readouterr()
    code, out = _verify_after(db, capsys, "DROP TRIGGER trail_index_no_delete",
                              "DELETE FROM trail_index WHERE seq = (SELECT seq FROM audit_log "
                              "WHERE kind = 'tool_call.completed')")
    assert code == 3
    assert "FAILED: the trail index lacks entry 6" in out
    assert "the chain itself verified: 9 entries" in out


def test_a_db_that_is_not_a_ledger_exits_5(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "junk.db"
    bad.write_bytes(b"junk" * 1000)
    assert main(["--db", str(bad), "runs"]) == 5
    assert "cannot open ledger" in capsys.readouterr().err


def test_an_empty_question_is_a_usage_error_and_no_turn(
        tmp_path: Path, script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.db"
    assert main(["--db", str(db), "ask", "  ", "--model", f"scripted:{script}"]) == 2
    assert capsys.readouterr().err == "overt: the question is empty\n"
    assert not db.exists()  # not even opened


@pytest.mark.slow
def test_a_db_whose_folder_cannot_be_made_exits_5_without_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = subprocess.run([sys.executable, "-m", "overt.cli.main", "--db",
                          str(blocker / "sub" / "l.db"), "ledger", "migrate"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 5, out.stderr
    assert out.stderr.startswith(f"overt: cannot open ledger {blocker / 'sub' / 'l.db'}: ")
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert blocker.read_text() == "not a folder"


@pytest.mark.slow
def test_the_console_script_reads_overt_db_from_the_environment(tmp_path: Path,
                                                                script: Path) -> None:
    env = {**os.environ, "OVERT_DB": str(tmp_path / "env.db")}
    out = subprocess.run(
        [sys.executable, "-m", "overt.cli.main", "ask", "q", "--model", f"scripted:{script}"],
        env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "You used 0 tokens today."
    assert (tmp_path / "env.db").exists() and (tmp_path / "transcript.jsonl").exists()


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path, script: Path) -> None:
    db = tmp_path / "l.db"
    for _ in range(60):  # an export of well over the pipe's 64 KiB buffer
        _ask(db, script)
    proc = subprocess.Popen([sys.executable, "-m", "overt.cli.main", "--db", str(db), "ledger",
                             "export"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()


@pytest.mark.slow
def test_demo_prints_the_question_answer_tools_turn_and_how_to_see_its_record(
    tmp_path: Path, script: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "argv", [".venv/bin/overt"])
    db = tmp_path / "l.db"
    assert main(["--db", str(db), "demo", "--model", f"scripted:{script}"]) == 0
    out = capsys.readouterr().out
    lines = dict(line.split(":", 1) for line in out.splitlines())
    assert lines["answer"].strip() == "You used 0 tokens today."
    assert lines["tools used"].strip() == "get_usage"
    turn_id = lines["turn id"].strip()
    assert lines["its record"].strip() == f".venv/bin/overt --db {db} show {turn_id} --content"
    assert lines["verify"].strip() == f".venv/bin/overt --db {db} ledger verify"
    assert "question" in lines


@pytest.mark.parametrize("age", ["99999999999999999999d", "9" * 5000 + "w", "3000000d"])
def test_prune_with_an_absurd_duration_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], age: str
) -> None:
    db = tmp_path / "l.db"
    assert main(["--db", str(db), "ledger", "prune", "--older-than", age]) == 2
    err = capsys.readouterr().err
    assert "reaches back before year 1" in err and "Traceback" not in err
