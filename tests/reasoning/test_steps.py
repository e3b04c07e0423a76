"""TurnSteps against a real ledger: steps land in the batches of the records they
describe, numbered without gaps, linked to calls, decisions and approvals."""

from __future__ import annotations

from typing import Any

import pytest

from overt.ledger import sql
from overt.ledger.base import Entry
from overt.reasoning.steps import RESULT_CHARS, TurnSteps, next_step_number
from tests.backends import Raw
from tests.conftest import run
from tests.reasoning.turns import (
    held_for_approval_then_approved,
    thinking_two_calls_a_denial_and_an_error,
)


def steps_of(ledger: Any, turn_id: str) -> list[Entry]:
    return run(ledger.entries(turn_id=turn_id, kinds=["reasoning.step"]))


def test_thinking_two_calls_a_denial_and_an_error_give_the_expected_steps(ledger: Any) -> None:
    turn = run(thinking_two_calls_a_denial_and_an_error(ledger))
    steps = steps_of(ledger, turn.turn_id)
    got = [(e.data["step_number"], e.data["phase"], run(ledger.content(
        e.data["content_digest"], seq=e.seq)), e.data["tool_call_id"],
        e.data["policy_decision_id"], e.data["approval_request_id"]) for e in steps]
    denial = turn.decision_ids[0]
    assert got == [
        (0, "thinking", "The user wants a status.", None, None, None),
        (1, "plan", "Plan:\n1. check_credits\n2. check_inbox", None, None, None),
        (2, "thinking", "I'll call both tools.", None, None, None),
        (3, "execute", "check_credits -> ok, $2.50 remaining", "tc1", None, None),
        (4, "execute", "check_inbox -> ok, 3 unprocessed messages", "tc2", None, None),
        (5, "thinking", "Old mail should go.", None, None, None),
        (6, "thinking", "Deleting old mail.", None, None, None),
        (7, "waiting_approval",
         "delete_mail denied by policy (mutating_denied): delete_mail is not allowed "
         "unattended", "tc3", denial, None),
        (8, "error", "fetch_url -> execution_error, RuntimeError: connection reset", "tc4",
         None, None),
    ]
    assert all(e.session_id == "s1" and e.turn_id == turn.turn_id for e in steps)
    assert run(ledger.verify(check_bodies=False)).ok  # turns.py names bodies it never stores


def test_a_step_is_committed_with_the_record_it_describes(ledger: Any) -> None:
    turn = run(thinking_two_calls_a_denial_and_an_error(ledger))
    entries = run(ledger.entries(turn_id=turn.turn_id))
    at_of = {(e.kind, e.data.get("tool_call_id")): e.at for e in entries}
    by_call = {e.data["tool_call_id"]: e.at for e in entries
               if e.kind == "reasoning.step" and e.data["tool_call_id"]}
    # same commit, same timestamp: the step and the completion it describes
    assert by_call["tc1"] == at_of[("tool_call.completed", "tc1")]
    assert by_call["tc3"] == at_of[("policy.decision", "tc3")]


def test_an_approval_held_turn_links_decision_and_request_and_numbering_resumes(
        ledger: Any) -> None:
    turn = run(held_for_approval_then_approved(ledger))
    steps = [(e.data["step_number"], e.data["phase"], e.data["policy_decision_id"],
              e.data["approval_request_id"]) for e in steps_of(ledger, turn.turn_id)]
    assert steps == [(0, "plan", None, None),
                     (1, "waiting_approval", turn.decision_ids[0], turn.request_ids[0]),
                     (2, "execute", None, None)]
    assert run(next_step_number(ledger, turn.turn_id)) == 3
    assert run(next_step_number(ledger, "no-such-turn")) == 0


def test_an_update_of_a_step_is_rejected_by_the_database(ledger: Any, raw: Raw) -> None:
    run(thinking_two_calls_a_denial_and_an_error(ledger))
    with pytest.raises(raw.append_only_error, match="append-only"):
        raw.execute("UPDATE audit_log SET data = '{}' WHERE kind = 'reasoning.step'")
    with pytest.raises(raw.append_only_error, match="append-only"):
        raw.execute("DELETE FROM audit_log WHERE kind = 'reasoning.step'")


def test_the_reasoning_steps_view_has_the_seed_table_shape(ledger: Any, raw: Raw) -> None:
    turn = run(thinking_two_calls_a_denial_and_an_error(ledger))
    rows = raw.query("SELECT id, turn_id, session_id, step_number, phase, content_digest, "
                     "linked_tool_call, linked_policy_decision, linked_approval_request, "
                     "created_at FROM reasoning_steps WHERE phase = ? ORDER BY step_number",
                     ("execute",))
    assert [(r[1], r[3], r[4], r[6]) for r in rows] == [
        (turn.turn_id, 3, "execute", "tc1"), (turn.turn_id, 4, "execute", "tc2")]
    assert all(isinstance(r[3], int) and r[5].startswith("sha256:") for r in rows)


def test_steps_are_indexed_by_time_and_phase(ledger: Any, raw: Raw) -> None:
    run(thinking_two_calls_a_denial_and_an_error(ledger))
    if raw.pg:
        names = raw.query("SELECT indexname FROM pg_indexes WHERE tablename = 'audit_log' "
                          "AND schemaname = current_schema()")
    else:
        names = raw.query("SELECT name FROM sqlite_master WHERE type = 'index'")
        for where in ("at >= '2026' AND json_extract(data, '$.phase') = 'error'",
                      "json_extract(data, '$.phase') = 'error'"):
            plan = raw.query("EXPLAIN QUERY PLAN SELECT seq FROM audit_log WHERE kind = "
                             f"'reasoning.step' AND {where}")
            assert "audit_log_steps_at" in str(plan), plan
    assert ("audit_log_steps_at",) in names
    assert ("audit_log_reasoning_phase",) not in names  # by time first, not by phase


def test_kinds_written_often_stay_out_of_the_kind_index(ledger: Any, raw: Raw) -> None:
    run(thinking_two_calls_a_denial_and_an_error(ledger))
    if raw.pg:
        return  # the planner's choice on a tiny table proves nothing there
    for kind in ("inference", "turn.started", "tool_call.completed", "approval.requested"):
        plan = raw.query(f"EXPLAIN QUERY PLAN {sql.count(sql.SQLITE, kind)}", (kind, ""))
        assert "audit_log_kind_at" in str(plan), (kind, plan)
    indexed = raw.query("SELECT count(*) FROM audit_log INDEXED BY audit_log_kind_at "
                        f"WHERE {sql.KIND_INDEXED} AND kind > ''")[0][0]
    everything = raw.query("SELECT count(*) FROM audit_log")[0][0]
    steps = raw.query("SELECT count(*) FROM audit_log WHERE kind IN "
                      "('reasoning.step', 'policy.decision', 'tool_call.started')")[0][0]
    assert steps and indexed == everything - steps
    assert run(ledger.count("reasoning.step")) == raw.query(
        "SELECT count(*) FROM audit_log WHERE kind = 'reasoning.step'")[0][0]


class _Sink:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.contents: dict[str, str] = {}

    def add(self, event: Any, **contents: str) -> None:
        self.events.append(event)

    def content(self, body: str) -> str:
        digest = f"d{len(self.contents)}"
        self.contents[digest] = body
        return digest


def test_a_long_result_is_quoted_to_500_characters() -> None:
    sink = _Sink()
    steps = TurnSteps(sink, "T", "S")
    steps.executed("c1", "read", "ok", "x" * 2000)
    body = sink.contents[sink.events[0].content_digest]
    assert body.startswith("read -> ok, xxx") and body.endswith("…")
    assert len(body) - len("read -> ok, ") == RESULT_CHARS


def test_a_failed_call_is_an_error_step_linked_to_it() -> None:
    sink = _Sink()
    step = TurnSteps(sink, "T", "S").executed("c1", "read", "timeout", "")
    assert (step.phase, step.tool_call_id, sink.contents[step.content_digest]) == (
        "error", "c1", "read -> timeout")


def test_a_model_failure_is_an_error_step_and_numbers_go_on_from_next_number() -> None:
    sink = _Sink()
    steps = TurnSteps(sink, "T", "S", next_number=4)
    steps.model_reasoning("calling a tool", "")
    step = steps.failed("model_error: ConnectionError: refused")
    assert [e.step_number for e in sink.events] == [4, 5] and step.phase == "error"
    assert steps.next_number == 6


def test_a_final_answer_is_not_a_step_but_its_think_blocks_are() -> None:
    sink = _Sink()
    TurnSteps(sink, "T", "S").model_reasoning("<think>[計画] 1. answer</think>The answer is 4",
                                              "thought about it", final=True)
    assert [(e.phase, sink.contents[e.content_digest]) for e in sink.events] == [
        ("thinking", "thought about it"), ("plan", "1. answer")]


def test_a_quarantined_call_is_worded_as_quarantined_and_linked() -> None:
    sink = _Sink()
    steps = TurnSteps(sink, "T", "S")
    q = steps.held("wire", "risky", "", "d1", "r1", "c1", effect="quarantine")
    assert sink.contents[q.content_digest] == "wire quarantined by policy (risky)"
    assert (q.policy_decision_id, q.approval_request_id) == ("d1", "r1")
