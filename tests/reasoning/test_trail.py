"""The audit trail of a session, of a turn, of a time window: in order, joined."""

from __future__ import annotations

import time
from typing import Any

import pytest

from overt.clock import now_iso
from overt.errors import UsageError
from overt.reasoning.trail import build_trail
from tests.conftest import run
from tests.reasoning.turns import (
    held_for_approval_then_approved,
    thinking_two_calls_a_denial_and_an_error,
)


def test_the_trail_of_a_three_turn_session_is_in_order_with_everything_joined(
        ledger: Any) -> None:
    first = run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "first"))
    run(thinking_two_calls_a_denial_and_an_error(ledger, "other", "elsewhere"))
    second = run(held_for_approval_then_approved(ledger, "s1"))
    third = run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "third"))
    trail = run(build_trail(ledger, session_id="s1"))
    assert [t.turn_id for t in trail.turns] == [first.turn_id, second.turn_id, third.turn_id]
    assert [t.message for t in trail.turns] == ["first", "send the report", "third"]
    assert all(t.status == "completed" and t.session_id == "s1" for t in trail.turns)
    one = trail.turns[0]
    assert [s.step_number for s in one.steps] == list(range(9))
    assert [(c.tool_call_id, c.status) for c in one.tool_calls] == [
        ("tc1", "ok"), ("tc2", "ok"), ("tc3", "not_allowed"), ("tc4", "execution_error")]
    assert [(d.decision_id, d.effect, d.rule) for d in one.decisions] == [
        (first.decision_ids[0], "deny", "no-unattended-writes")]
    held = trail.turns[1]
    assert [(a.request_id, a.mode, a.decision, a.decided_by) for a in held.approvals] == [
        (second.request_ids[0], "approval", "approved", "cli:boss")]
    assert held.paused_on is None
    seqs = [r.seq for r in held.records()]
    assert seqs == sorted(seqs) and len(seqs) == 3 + 1 + 1 + 1


def test_the_trail_of_one_turn(ledger: Any) -> None:
    run(thinking_two_calls_a_denial_and_an_error(ledger))
    turn = run(thinking_two_calls_a_denial_and_an_error(ledger))
    trail = run(build_trail(ledger, turn_id=turn.turn_id))
    assert [t.turn_id for t in trail.turns] == [turn.turn_id]


def test_a_time_window_spans_sessions_and_takes_turns_started_in_it(ledger: Any) -> None:
    run(thinking_two_calls_a_denial_and_an_error(ledger, "a"))
    since = now_iso()
    b = run(thinking_two_calls_a_denial_and_an_error(ledger, "b"))
    c = run(held_for_approval_then_approved(ledger, "c"))
    until = now_iso()
    run(thinking_two_calls_a_denial_and_an_error(ledger, "d"))
    trail = run(build_trail(ledger, since=since, until=until))
    assert [t.turn_id for t in trail.turns] == [b.turn_id, c.turn_id]
    only_c = run(build_trail(ledger, session_id="c", since=since))
    assert [t.turn_id for t in only_c.turns] == [c.turn_id]


def test_a_phase_filter_keeps_only_those_steps(ledger: Any) -> None:
    run(thinking_two_calls_a_denial_and_an_error(ledger))
    trail = run(build_trail(ledger, session_id="s1", phases=["error", "waiting_approval"]))
    assert [s.phase for _, s in trail.steps()] == ["waiting_approval", "error"]
    assert len(trail.turns[0].tool_calls) == 4  # other records stay


def test_a_paused_turn_says_what_it_waits_on(ledger: Any) -> None:
    turn = run(held_for_approval_then_approved(ledger))
    rows = run(ledger.trail_rows(turn_id=turn.turn_id))
    from overt.ledger.base import TrailRows
    from overt.ledger.trail_read import EVENT_COLUMNS, STEP_COLUMNS
    from overt.reasoning.trail import assemble

    # the turn as it stood while it waited: up to its pause
    seq = EVENT_COLUMNS.index("seq")
    paused = next(r[seq] for r in rows.events if r[EVENT_COLUMNS.index("kind")] == "turn.paused")
    rows = TrailRows(rows.turns, [r for r in rows.steps if r[STEP_COLUMNS.index("seq")] <= paused],
                     [r for r in rows.events if r[seq] <= paused])

    assert assemble(rows)[0].paused_on == turn.request_ids[0]


def test_an_unknown_session_has_an_empty_trail_and_bad_asks_are_usage_errors(
        ledger: Any) -> None:
    assert run(build_trail(ledger, session_id="nobody")).turns == []
    with pytest.raises(UsageError, match="needs a turn, a session or a time range"):
        run(build_trail(ledger))
    with pytest.raises(UsageError, match="unknown phase musing"):
        run(build_trail(ledger, session_id="s1", phases=["musing"]))


def test_a_step_whose_text_is_not_stored_reads_as_none(ledger: Any) -> None:
    from overt.events import ReasoningStepRecorded

    run(thinking_two_calls_a_denial_and_an_error(ledger))
    run(ledger.record([ReasoningStepRecorded(
        turn_id="T-lost", session_id="s1", step_id="S", step_number=0, phase="thinking",
        content_digest="sha256:" + "0" * 64)]))
    trail = run(build_trail(ledger, turn_id="T-lost"))
    assert [(s.step_number, s.content) for _, s in trail.steps()] == [(0, None)]


def test_a_turn_whose_start_was_pruned_keeps_its_place_its_session_and_its_first_time(
        ledger: Any) -> None:
    from overt.engine.record import Recorder
    from overt.ids import new_ulid
    from overt.reasoning.steps import TurnSteps
    from tests.reasoning.turns import call_done, completed, started

    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "pruned whole"))
    rec, turn_id = Recorder(ledger, []), new_ulid()
    steps = TurnSteps(rec, turn_id, "s1")
    rec.add(started(rec, turn_id, "s1", "cut in two"))
    steps.model_reasoning("Checking.", "")
    run(rec.flush())
    time.sleep(0.002)  # the cutoff falls strictly inside the turn
    cutoff = now_iso()
    rec.add(call_done(rec, turn_id, "s1", "tc1", "check_credits", "ok", "$2"))
    run(rec.flush())  # the turn's first entry left: a tool call, alone in its commit
    time.sleep(0.002)
    steps.executed("tc1", "check_credits", "ok", "$2")
    rec.add(completed(rec, turn_id, "s1", tools=1))
    run(rec.flush())
    after = run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "after"))
    assert run(ledger.prune(cutoff)).removed_entries > 0

    first_left = run(ledger.entries(turn_id=turn_id, kinds=["tool_call.completed"]))[0]
    for trail in (run(build_trail(ledger, session_id="s1")),
                  run(build_trail(ledger, turn_id=turn_id))):
        cut = trail.turns[0]
        assert cut.turn_id == turn_id and cut.message is None and cut.session_id == "s1"
        assert cut.started_at == first_left.at  # not the time of its first step left
        assert [c.tool_call_id for c in cut.tool_calls] == ["tc1"]
        assert [s.phase for s in cut.steps] == ["execute"] and cut.status == "completed"
    assert [t.turn_id for t in run(build_trail(ledger, session_id="s1")).turns] == [
        turn_id, after.turn_id]
