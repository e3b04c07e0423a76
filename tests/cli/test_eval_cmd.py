from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.cli.main import main
from overt.ledger import open_ledger
from tests.conftest import run

CASES = {"format": "overt-eval/1", "cases": [
    {"id": "spend", "category": "usage", "question": "What did I spend over the last 7 days?",
     "expect": {"tool": "get_usage", "args": {"period": "7d"}}},
    {"id": "math", "category": "no-tool", "question": "What is 17 times 23?",
     "expect": {"tool": None}, "allowed_figures": [391]},
]}


def _files(tmp_path: Path) -> tuple[Path, Path]:
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(CASES))
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        '{"tool_calls": [{"name": "get_usage", "arguments": {"period": "7d"}}]}\n'
        '{"text": "You spent $0 this week."}\n'
        '{"text": "17 times 23 is 401."}\n')
    return cases, replies


def test_eval_prints_each_case_and_the_figures_and_writes_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, replies = _files(tmp_path)
    out = tmp_path / "results" / "eval.json"
    assert main(["--db", str(tmp_path / "l.db"), "eval", "--model", f"scripted:{replies}",
                 "--cases", str(cases), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "PASS  spend" in printed and "FAIL  math" in printed
    assert "invented figures: 401" in printed
    assert "accuracy    1/2 = 50.0%" in printed
    assert "invented    1 figures, 0 names in 1 cases" in printed
    result = json.loads(out.read_text())
    assert result["summary"]["passed"] == 1
    assert [c["id"] for c in result["cases"]] == ["spend", "math"]


def test_eval_records_its_result_with_the_prompt_digest_in_the_ledger(tmp_path: Path) -> None:
    cases, replies = _files(tmp_path)
    db = tmp_path / "l.db"
    assert main(["--db", str(db), "eval", "--model", f"scripted:{replies}",
                 "--cases", str(cases)]) == 0

    async def entries() -> list[object]:
        ledger = open_ledger(str(db))
        try:
            return list(await ledger.entries(kinds=["eval.completed"]))
        finally:
            await ledger.close()

    [entry] = run(entries())
    data = entry.data  # type: ignore[attr-defined]
    assert (data["cases"], data["passed"], data["invented_figures"]) == (2, 1, 1)
    assert data["prompt_sha256"].startswith("sha256:")


def test_a_malformed_case_file_is_a_usage_error(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "cases.json"
    bad.write_text('{"cases": [{"id": "x"}]}')
    assert main(["--db", str(tmp_path / "l.db"), "eval", "--model", "scripted:none.jsonl",
                 "--cases", str(bad)]) == 2
    assert "question must be a non-empty string" in capsys.readouterr().err
