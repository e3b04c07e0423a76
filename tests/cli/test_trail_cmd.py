"""``overt trail``, ``overt export`` and the steps in ``overt show``, through ``main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.cli.main import main
from overt.ledger.sqlite import SqliteLedger
from tests.conftest import run
from tests.reasoning.turns import (
    held_for_approval_then_approved,
    thinking_two_calls_a_denial_and_an_error,
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite ledger with a two-turn session s1 and a turn of session s2 (the
    storage half is tested on both backends in tests/reasoning)."""
    path = tmp_path / "ledger.db"
    ledger = SqliteLedger.open(path)
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "how are my credits?"))
    run(held_for_approval_then_approved(ledger, "s1"))
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s2"))
    ledger.close_sync()
    return path


def first_turn(db: Path) -> str:
    ledger = SqliteLedger.open(db)
    turn_id = run(ledger.recent_turns(10))[-1].turn_id
    ledger.close_sync()
    return str(turn_id)


def test_trail_prints_each_turn_of_the_session_with_its_records_in_order(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), "trail", "s1"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nturn ") + out.startswith("turn ") == 2
    assert "asked: how are my credits?" in out
    assert "step 7 waiting_approval: delete_mail denied by policy" in out
    assert "policy deny delete_mail (tc3) rule no-unattended-writes" in out
    assert "tool call tc4 fetch_url -> execution_error" in out
    assert "approval " in out and "approved by cli:boss" in out
    assert out.index("step 0 thinking") < out.index("step 3 execute") < out.index("step 8 error")


def test_trail_filters_phases_and_spans_sessions_by_time(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), "trail", "--since", "2000-01-01", "--phase", "error",
                 "--json"]) == 0
    trail = json.loads(capsys.readouterr().out)
    assert [t["session_id"] for t in trail["turns"]] == ["s1", "s1", "s2"]
    assert {s["phase"] for t in trail["turns"] for s in t["steps"]} == {"error"}


def test_trail_without_session_or_window_is_a_usage_error_and_unknown_is_not_found(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), "trail"]) == 2
    assert main(["--db", str(db), "trail", "nobody"]) == 4
    assert main(["--db", str(db), "trail", "s1", "--phase", "musing"]) == 2
    assert "unknown phase musing" in capsys.readouterr().err


def test_export_of_a_turn_is_markdown_in_seed_format(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turn_id = first_turn(db)
    assert main(["--db", str(db), "export", turn_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"## Turn {turn_id} (")
    assert "\n\n[実行] check_credits -> ok, $2.50 remaining (tool_call: tc1)\n" in out
    assert "\n\n[エラー] fetch_url -> execution_error" in out


def test_export_of_a_session_in_english_labels_and_as_jsonl_to_a_file(
        db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), "export", "s1", "--labels", "en"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Session s1\n\n## Turn ") and out.count("## Turn ") == 2
    assert "[waiting_approval] send_mail held for approval" in out
    target = tmp_path / "steps.jsonl"
    assert main(["--db", str(db), "export", "s1", "--format", "jsonl",
                 "--output", str(target)]) == 0
    lines = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 9 + 3 and lines[0]["phase"] == "thinking"


def test_export_of_an_unknown_id_exits_4(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), "export", "NOPE"]) == 4
    assert capsys.readouterr().err == "overt: no such turn or session\n"


def test_show_lists_the_steps_and_their_text_with_content(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turn_id = first_turn(db)
    assert main(["--db", str(db), "show", turn_id]) == 0
    out = capsys.readouterr().out
    assert "step 1 plan" in out and "step 3 execute  call tc1" in out
    assert "step 7 waiting_approval  call tc3  decision " in out
    assert main(["--db", str(db), "show", turn_id, "--content"]) == 0
    assert "    text: check_credits -> ok, $2.50 remaining" in capsys.readouterr().out


def test_old_ledger_export_still_works(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), "ledger", "export", "--session", "s2"]) == 0
    assert all(json.loads(line)["session_id"] == "s2"
               for line in capsys.readouterr().out.splitlines())
