"""``overt approvals``: the walkthrough of docs/guides/policy.md, each step its own
process, as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

RULE = """
[[policy.rules]]
name = "usage-is-private"
tools = ["get_usage"]
effect = "ask"
reason_code = "usage_is_private"
message = "usage figures are shown after an operator approves"
"""


def overt(cwd: Path, *args: str, model: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OVERT_DB": str(cwd / "ledger.db"), "OVERT_TRANSCRIPT": ""}
    if model is not None:
        env["OVERT_MODEL"] = model
    return subprocess.run([sys.executable, "-m", "overt.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "overt.toml").write_text(RULE, encoding="utf-8")
    # one turn's replies: the call, then (after the approval, in whichever process)
    # the answer; the turn finishes on this model wherever it is approved
    (tmp_path / "ask.jsonl").write_text(
        '{"tool_calls": [{"name": "get_usage", "arguments": {"period": "today"}}]}\n'
        '{"text": "You have used 0 tokens today."}\n')
    (tmp_path / "answer.jsonl").write_text('{"text": "I am another model."}\n')
    return tmp_path


def _pause(project: Path) -> str:
    asked = overt(project, "ask", "How many tokens have I used today?",
                  model=f"scripted:{project / 'ask.jsonl'}")
    assert asked.returncode == 0, asked.stderr
    match = re.search(r"Approval request (\w+)", asked.stdout)
    assert match, asked.stdout
    return match.group(1)


@pytest.mark.slow
def test_ask_approve_and_the_finished_answer(project: Path) -> None:
    request_id = _pause(project)
    listed = overt(project, "approvals", "list")
    assert all(word in listed.stdout for word in (request_id, "pending", "get_usage"))
    approved = overt(project, "approvals", "approve", request_id, "--reason", "fine",
                     model=f"scripted:{project / 'answer.jsonl'}")
    assert approved.returncode == 0, approved.stderr
    assert "approved by operator:default" in approved.stdout
    assert "You have used 0 tokens today." in approved.stdout
    assert "tools used: get_usage" in approved.stdout
    again = overt(project, "approvals", "approve", request_id)
    assert again.returncode == 6 and "already approved" in again.stderr
    shown = overt(project, "approvals", "show", request_id, "--json")
    detail = json.loads(shown.stdout)
    assert (detail["status"], detail["reason"], detail["resumed"]) == ("approved", "fine", True)
    assert overt(project, "approvals", "list").stdout.startswith("no approval requests")
    assert overt(project, "ledger", "verify").returncode == 0


@pytest.mark.slow
def test_deny_needs_a_reason_and_the_turn_answers_without_the_tool(project: Path) -> None:
    request_id = _pause(project)
    assert overt(project, "approvals", "deny", request_id).returncode == 2
    denied = overt(project, "approvals", "deny", request_id, "--reason", "not today",
                   model=f"scripted:{project / 'answer.jsonl'}")
    assert denied.returncode == 0, denied.stderr
    assert "denied by operator:default" in denied.stdout and "tools used: (none)" in denied.stdout


@pytest.mark.slow
def test_an_actor_without_the_capability_is_refused(project: Path) -> None:
    request_id = _pause(project)
    refused = overt(project, "approvals", "approve", request_id, "--as", "agent:default")
    assert refused.returncode == 6 and "approvals.decide" in refused.stderr


@pytest.mark.slow
def test_an_unknown_request_is_exit_code_4(project: Path) -> None:
    assert overt(project, "approvals", "show", "01NOSUCH").returncode == 4


@pytest.mark.slow
def test_show_tells_the_whole_story_of_a_paused_and_resumed_turn(project: Path) -> None:
    request_id = _pause(project)
    overt(project, "approvals", "approve", request_id, "--reason", "fine",
          model=f"scripted:{project / 'answer.jsonl'}")
    turn_id = json.loads(overt(project, "approvals", "show", request_id, "--json").stdout)[
        "turn_id"]
    shown = overt(project, "show", turn_id, "--content").stdout
    for line in ("policy ask get_usage", "rule usage-is-private",
                 f"approval requested {request_id}", "turn paused",
                 f"approval {request_id} approved by operator:default", "reason: fine",
                 "turn resumed (approved)", "policy allow get_usage", "[approved]",
                 "reply: You have used 0 tokens today."):
        assert line in shown, line


@pytest.mark.slow
def test_a_reason_that_is_not_utf8_is_refused_and_the_request_left_pending(
        project: Path) -> None:
    request_id = _pause(project)
    env = {**os.environ, "OVERT_DB": str(project / "ledger.db"), "OVERT_TRANSCRIPT": ""}
    denied = subprocess.run(  # what a Latin-1 terminal passes for "café"
        [sys.executable, "-m", "overt.cli", "approvals", "deny", request_id, "--reason",
         b"pas de caf\xe9"], cwd=project, env=env, capture_output=True, timeout=120)
    assert denied.returncode == 2, denied.stderr
    assert b"--reason: the text is not valid UTF-8 at character 10 (the byte 0xe9)" in \
        denied.stderr
    shown = json.loads(overt(project, "approvals", "show", request_id, "--json").stdout)
    assert (shown["status"], shown["reason"]) == ("pending", None)
