"""The sessions and turns tables' reads, on both backends: turns in each order with
their completions, sessions by their first turn with their sums, failures newest
first and counted."""

from __future__ import annotations

from typing import Any

from overt.ledger.reads import session_rows, turns
from overt.ledger.reads.failures import failure_counts, newest_failures
from tests.conftest import run
from tests.ledger.reads.records import OPERATOR, call, ended, started, turn


def _turns(ledger: Any) -> None:
    turn(ledger, "t1", "a", message="m1", reply="r1", actor="operator:alice", cost=0.5,
         duration=30.0)
    turn(ledger, "t2", "b", message="m2", reply="r2", status="model_error", cost=0.1,
         duration=90.0)
    turn(ledger, "t3", "a", message="m3", reply="r3", actor="operator:alice", cost=2.0,
         duration=10.0)
    ledger.record_sync([started("t4", "c", actor="operator:bob")])  # still running


def _walk(ledger: Any, order: Any, **more: Any) -> list[str]:
    found = run(turns.turn_records(ledger, order=order, after=None, **more))
    return [r.turn_id for r in found]


def test_turns_come_in_each_order_with_what_their_completion_says(ledger: Any) -> None:
    _turns(ledger)
    assert _walk(ledger, "newest") == ["t4", "t3", "t2", "t1"]
    assert _walk(ledger, "oldest") == ["t1", "t2", "t3", "t4"]
    assert _walk(ledger, "cost") == ["t3", "t1", "t2"]  # ended turns only
    assert _walk(ledger, "duration") == ["t2", "t1", "t3"]
    [first, *_] = run(turns.turn_records(ledger, order="oldest", after=None, limit=1))
    assert (first.seq, first.session_id, first.actor, first.source, first.model) == (
        1, "a", "operator:alice", "cli", "scripted")
    assert (first.status, first.cost_usd, first.duration_ms, first.done_seq) == (
        "completed", 0.5, 30.0, 2)
    assert (first.input_tokens, first.output_tokens, first.tool_calls) == (3, 4, 0)
    running = run(turns.turn_record(ledger, "t4"))
    assert running is not None and running.status is None and running.done_seq is None


def test_a_page_follows_its_cursor_and_the_filters(ledger: Any) -> None:
    _turns(ledger)
    [t3] = run(turns.turn_records(ledger, order="newest", after=(0.0, 7), limit=1))
    assert t3.turn_id == "t3"
    assert [r.turn_id for r in run(turns.turn_records(
        ledger, order="cost", after=(2.0, t3.done_seq or 0)))] == ["t1", "t2"]
    assert _walk(ledger, "newest", actor="operator:alice") == ["t3", "t1"]
    assert _walk(ledger, "oldest", sessions=["b", "c"]) == ["t2", "t4"]
    assert _walk(ledger, "oldest", sessions=[]) == []
    assert _walk(ledger, "newest", source="slack_dm") == []
    assert _walk(ledger, "newest", since="9999-01-01") == []
    assert run(turns.turn_record(ledger, "t1", actor="operator:bob")) is None
    assert run(turns.turn_record(ledger, "nowhere")) is None


def test_failures_come_newest_first_each_key_once_and_are_counted(ledger: Any) -> None:
    _turns(ledger)
    ledger.record_sync([started("t5", "b"), *call("t5", "b", "c1", "lookup", "{}", "no",
                                                  status="execution_error"),
                        ended("t5", "b", "tool_error_streak")])

    async def walk(column: Any, before: int | None = None) -> list[tuple[int, str]]:
        return [found async for found in newest_failures(ledger, column, before, 10)]

    by_turn = run(walk("turn_id"))
    assert [key for _, key in by_turn] == ["t5", "t2"]
    assert [key for _, key in run(walk("session_id"))] == ["b"]  # at its newest failure
    assert run(walk("turn_id", before=by_turn[0][0])) == by_turn[1:]
    assert run(failure_counts(ledger, "turn_id", ["t1", "t2", "t5"])) == {"t2": 1, "t5": 2}
    assert run(failure_counts(ledger, "session_id", ["a", "b"])) == {"b": 3}
    assert run(failure_counts(ledger, "turn_id", [])) == {}


def test_sessions_start_at_their_first_turn_and_add_up_their_turns(ledger: Any) -> None:
    _turns(ledger)

    def walk(order: Any, after: int | None = None, **more: Any) -> list[str]:
        found = run(session_rows.session_starts(ledger, order=order, after=after, **more))
        return [s.session_id for s in found]

    assert walk("newest") == ["c", "b", "a"]  # t3 is not the first of a
    assert walk("oldest") == ["a", "b", "c"]
    assert walk("newest", after=3) == ["a"]
    assert walk("oldest", owner="operator:bob") == ["c"]
    assert walk("oldest", owner=OPERATOR) == ["b"]
    assert walk("oldest", sessions=["b"]) == ["b"]
    start = run(session_rows.session_start(ledger, "a"))
    assert start is not None
    assert (start.seq, start.actor, start.source) == (1, "operator:alice", "cli")
    b = run(session_rows.session_start(ledger, "b"))
    assert b is not None and b.actor == OPERATOR
    assert run(session_rows.session_start(ledger, "a", owner="operator:bob")) is None
    sums = run(session_rows.session_sums(ledger, ["a", "c", "nowhere"]))
    assert set(sums) == {"a", "c"}
    assert (sums["a"].turns, sums["a"].cost_usd, sums["a"].duration_ms) == (2, 2.5, 40.0)
    assert sums["c"].turns == 1 and sums["c"].cost_usd == 0.0 and sums["c"].last_at
