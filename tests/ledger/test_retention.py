"""Retention: prune removes a sealed prefix, and verify still proves what remains."""

from __future__ import annotations

from typing import Any

from overt.clock import now_iso
from overt.events import Event, LedgerPruned, TurnCompleted, TurnPaused, TurnStarted
from overt.ledger.canonical import digest_text
from tests.backends import Raw
from tests.conftest import run


def _turn(turn_id: str, *, completed: bool = True) -> list[Event]:
    started = TurnStarted(turn_id=turn_id, session_id="S", source="cli",
                          caller_session_id="cli:S",
                          message_digest=digest_text(f"body of {turn_id}"),
                          model="m", route="default", max_tool_calls=5, actor="operator:default")
    if not completed:
        return [started]
    return [started, TurnCompleted(
        turn_id=turn_id, session_id="S", status="completed", reply_digest=None,
        tools_used=[], tool_calls=0, model_calls=1, input_tokens=0, output_tokens=0,
        cost_usd=0.0, duration_ms=1.0)]


def _record_turns(ledger: Any, *names: str) -> None:
    for name in names:
        run(ledger.record(_turn(name), {digest_text(f"body of {name}"): f"body of {name}"}))


def test_prune_removes_the_old_range_records_itself_and_verify_passes(
    ledger: Any, raw: Raw
) -> None:
    _record_turns(ledger, "old-1", "old-2")
    cutoff = now_iso()
    _record_turns(ledger, "new-1")
    record = run(ledger.prune(cutoff))
    assert record.removed_entries == 4 and record.first_removed_seq == 1
    assert record.through_seq == 4 and record.removed_content == 2
    report = run(ledger.verify())
    assert report.ok and report.first_seq == 5
    remaining = [e.turn_id for e in run(ledger.entries(kinds=["turn.started"]))]
    assert remaining == ["new-1"]
    assert run(ledger.content(digest_text("body of old-1"))) is None
    assert run(ledger.content(digest_text("body of new-1"))) == "body of new-1"
    (pruned,) = run(ledger.entries(kinds=["ledger.pruned"]))
    assert pruned.event(LedgerPruned).last_removed_hash == raw.query(
        "SELECT prev_hash FROM audit_log WHERE seq = 5")[0][0]


def test_a_second_prune_chains_from_the_first(ledger: Any) -> None:
    _record_turns(ledger, "a")
    run(ledger.prune(now_iso()))
    _record_turns(ledger, "b")
    second = run(ledger.prune(now_iso()))
    assert second.removed_entries == 3  # turn b's two entries and the first prune record
    _record_turns(ledger, "c")
    report = run(ledger.verify())
    assert report.ok and report.entries == 3


def test_nothing_to_prune_is_still_recorded(ledger: Any) -> None:
    _record_turns(ledger, "fresh")
    record = run(ledger.prune("2000-01-01T00:00:00.000000Z"))
    assert record.removed_entries == 0
    assert [e.kind for e in run(ledger.entries())][-1] == "ledger.pruned"
    assert run(ledger.verify()).ok


def test_prune_never_touches_a_turn_still_waiting_on_something(ledger: Any) -> None:
    _record_turns(ledger, "done-before")
    run(ledger.record(_turn("waiting", completed=False),  # its message stored, as a turn's is
                      {digest_text("body of waiting"): "body of waiting"}))

    run(ledger.record([TurnPaused(turn_id="waiting", session_id="S", request_id="r",
                                  tool_call_id="c", tool_name="t",
                                  checkpoint_digest=digest_text("checkpoint"))],
                      {digest_text("checkpoint"): "checkpoint"}))
    _record_turns(ledger, "done-after")
    record = run(ledger.prune(now_iso()))
    assert record.held_back_by_turn == "waiting"
    assert record.through_seq == 2  # only the turn before the waiting one
    assert [e.turn_id for e in run(ledger.entries(kinds=["turn.started"]))] == [
        "waiting", "done-after"]
    assert run(ledger.verify()).ok


def test_a_forged_prune_seal_is_caught(ledger: Any, raw: Raw) -> None:
    _record_turns(ledger, "x", "y")
    run(ledger.prune(now_iso()))
    raw.drop_guards()
    raw.execute("UPDATE audit_log SET data = replace(data, '\"through_seq\":4', "
                "'\"through_seq\":3') WHERE kind = 'ledger.pruned'")
    assert not run(ledger.verify()).ok


def test_deleting_entries_without_a_prune_record_is_caught(ledger: Any, raw: Raw) -> None:
    _record_turns(ledger, "x", "y")
    raw.drop_guards().execute("DELETE FROM audit_log WHERE seq <= 2")
    report = run(ledger.verify())
    assert not report.ok and "no prune record seals" in (report.problem or "")
