from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.cli.main import main


def _two_turns(db: Path, tmp_path: Path) -> None:
    script = tmp_path / "r.jsonl"
    script.write_text('{"text": "one two three four five six seven eight"}\n')
    for _ in range(2):
        assert main(["--db", str(db), "ask", "q", "--model", f"scripted:{script}"]) == 0


def test_usage_prints_the_burn_per_route_and_model(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.db"
    _two_turns(db, tmp_path)
    capsys.readouterr()
    assert main(["--db", str(db), "usage"]) == 0
    out = capsys.readouterr().out
    assert "default" in out and "scripted" in out and "total" in out


def test_usage_by_day_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.db"
    _two_turns(db, tmp_path)
    capsys.readouterr()
    assert main(["--db", str(db), "usage", "--by", "day", "--since", "all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["rows"]
    assert row["inferences"] == 2 and row["route"] == "*" and len(row["day"]) == 10


def test_an_unknown_grouping_is_a_usage_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(tmp_path / "l.db"), "usage", "--by", "colour"]) == 2
    assert "--by" in capsys.readouterr().err


def test_usage_by_session_sums_each_conversation(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.db"
    _two_turns(db, tmp_path)  # two asks: two sessions
    capsys.readouterr()
    assert main(["--db", str(db), "usage", "--by", "session", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 2 and all(r["session"].startswith("cli:") for r in rows)
    assert all(r["inferences"] == 1 for r in rows)
