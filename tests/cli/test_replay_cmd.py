"""``overt replay``: exit 0 when nothing diverges, 1 when something does, 3 when the
ledger does not verify; ``--policy`` is the what-if, ``--json`` the machine's form,
``--record`` the one entry replay may write."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from overt.cli.main import main


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    script = tmp_path / "replies.jsonl"
    script.write_text('{"tool_calls": [{"name": "get_usage", "arguments": {"period": "7d"}}]}\n'
                      '{"text": "You used 0 tokens."}\n')
    monkeypatch.setenv("OVERT_MODEL", f"scripted:{script}")
    monkeypatch.chdir(tmp_path)  # no overt.toml of the developer's
    db = tmp_path / "l.db"
    assert main(["--db", str(db), "ask", "what's my burn?", "--json"]) == 0
    return db, json.loads(capsys.readouterr().out)["turn_id"]


def entries(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [k for (k,) in conn.execute("SELECT kind FROM audit_log ORDER BY seq")]


@pytest.mark.slow
def test_a_turn_that_replays_as_recorded_exits_0_and_writes_nothing(
    recorded: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, turn_id = recorded
    before = entries(db)
    assert main(["--db", str(db), "replay", turn_id]) == 0
    assert "1 turns replayed, 0 diverge" in capsys.readouterr().out
    assert main(["--db", str(db), "replay", "--since", "7d"]) == 0
    assert entries(db) == before


@pytest.mark.slow
def test_a_policy_that_changes_a_decision_exits_1_with_the_line_and_the_summary(
    recorded: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, turn_id = recorded
    policy = tmp_path / "stricter.toml"
    policy.write_text('[[policy.rules]]\nname = "usage-is-private"\ntools = ["get_usage"]\n'
                      'effect = "deny"\nreason_code = "usage_is_private"\n')
    assert main(["--db", str(db), "replay", "--since", "7d", "--policy", str(policy)]) == 1
    out = capsys.readouterr().out
    assert f"{turn_id} call 0 get_usage: decision: recorded 'allow by default.read_only', " \
           "now 'deny by usage-is-private' (rule usage-is-private)" in out
    assert "rule usage-is-private: 1 decisions change" in out
    assert main(["--db", str(db), "replay", turn_id, "--policy", str(policy), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["decisions_changed"] == {"usage-is-private": 1}
    kinds = [d["kind"] for d in report["turns"][0]["divergences"]]
    assert "decision" in kinds and "refused" in kinds


@pytest.mark.slow
def test_record_appends_one_replay_completed_entry(
    recorded: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, turn_id = recorded
    assert main(["--db", str(db), "replay", turn_id, "--record"]) == 0
    assert entries(db)[-1] == "replay.completed"
    assert main(["--db", str(db), "ledger", "verify"]) == 0


def test_a_ledger_that_does_not_verify_is_refused_with_exit_3(
    recorded: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, turn_id = recorded
    with sqlite3.connect(db) as conn:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"
                                    ).fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("UPDATE content_blobs SET body = 'forged' WHERE body LIKE '%burn%'")
    assert main(["--db", str(db), "replay", turn_id]) == 3
    assert "replay refused: the ledger does not verify" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("argv", [[], ["T", "--since", "7d"], ["--policy", "nope.toml", "T"]])
def test_a_replay_without_one_scope_or_with_a_missing_policy_exits_2(
    recorded: tuple[Path, str], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = recorded
    assert main(["--db", str(db), "replay", *argv]) == 2
