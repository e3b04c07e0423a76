"""Markdown and JSON lines exports of a trail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overt.errors import UsageError
from overt.reasoning.export import jsonl_lines, markdown
from overt.reasoning.parse import parse_steps
from overt.reasoning.trail import Step, Trail, TurnTrail, build_trail
from tests.conftest import run
from tests.reasoning.turns import thinking_two_calls_a_denial_and_an_error

SNAPSHOTS = Path(__file__).parent / "snapshots"
AT = "2026-02-23T10:30:00.123456Z"


def fixed_turn() -> Trail:
    """Seed 004's example turn, with a denial, an error and a pruned step added."""
    steps = [
        Step(1, AT, "S0", 0, "thinking",
             "The user asked me to check system status. I should verify\ncredits balance "
             "first, then check if any inbox messages are pending.", "sha256:a"),
        Step(2, AT, "S1", 1, "plan", "1. Call check_credits  2. Call check_inbox", "sha256:b"),
        Step(5, AT, "S2", 2, "execute", "check_credits -> ok, $2.50 remaining", "sha256:c",
             tool_call_id="01JXYZ-TC1"),
        Step(8, AT, "S3", 3, "execute", "check_inbox -> ok, 3 unprocessed messages",
             "sha256:d", tool_call_id="01JXYZ-TC2"),
        Step(9, AT, "S4", 4, "waiting_approval",
             "delete_mail denied by policy (mutating_denied): not unattended", "sha256:e",
             tool_call_id="01JXYZ-TC3", policy_decision_id="01JXYZ-PD1"),
        Step(11, AT, "S5", 5, "waiting_approval",
             "send_mail held for approval by policy (needs_approval)\n\n"
             "awaiting human approval", "sha256:f", tool_call_id="01JXYZ-TC4",
             policy_decision_id="01JXYZ-PD2", approval_request_id="01JXYZ-AR1"),
        Step(12, AT, "S6", 6, "error", "fetch_url -> timeout", "sha256:g",
             tool_call_id="01JXYZ-TC5"),
        Step(13, AT, "S7", 7, "thinking", None, "sha256:" + "ab" * 32),
    ]
    turn = TurnTrail("01JXYZ", "cli:s1", AT, "cli", "m", "status?", "completed", AT,
                     steps=steps)
    return Trail([turn], turn_id="01JXYZ")


@pytest.mark.parametrize("labels", ["ja", "en"])
def test_the_markdown_of_a_fixed_turn_matches_its_snapshot(labels: str) -> None:
    expected = (SNAPSHOTS / f"turn_{labels}.md").read_text(encoding="utf-8")
    assert markdown(fixed_turn(), labels) == expected


def test_the_markdown_parses_back_into_the_same_phases() -> None:
    trail = fixed_turn()
    text = markdown(trail, "ja").split("\n\n", 1)[1]  # after the heading
    assert [s.phase for s in parse_steps(text)] == [s.phase for s in trail.turns[0].steps]


def test_a_session_export_has_a_session_heading_and_every_turn(ledger: Any) -> None:
    a = run(thinking_two_calls_a_denial_and_an_error(ledger))
    b = run(thinking_two_calls_a_denial_and_an_error(ledger))
    text = markdown(run(build_trail(ledger, session_id="s1")), "en")
    assert text.startswith("# Session s1\n\n## Turn " + a.turn_id)
    assert f"## Turn {b.turn_id}" in text
    assert "[waiting_approval] delete_mail denied by policy" in text


def test_jsonl_has_one_step_per_line_with_its_content_and_links(ledger: Any) -> None:
    turn = run(thinking_two_calls_a_denial_and_an_error(ledger))
    lines = [json.loads(line) for line in jsonl_lines(run(build_trail(ledger,
                                                                        turn_id=turn.turn_id)))]
    assert [(d["step_number"], d["phase"]) for d in lines][:2] == [(0, "thinking"), (1, "plan")]
    assert len(lines) == 9 and all(d["turn_id"] == turn.turn_id for d in lines)
    assert lines[7]["policy_decision_id"] == turn.decision_ids[0]
    assert lines[3]["content"] == "check_credits -> ok, $2.50 remaining"


def test_a_turn_without_steps_says_so_and_unknown_labels_are_refused() -> None:
    trail = Trail([TurnTrail("T1", "s", AT)], turn_id="T1")
    assert markdown(trail, "en") == "## Turn T1 (2026-02-23T10:30:00Z)\n\n" \
                                    "(no reasoning steps recorded)\n"
    with pytest.raises(UsageError, match="labels are one of en, ja"):
        markdown(trail, "fr")
