"""What replay reads in bulk, on both backends: the entries of several turns at once,
and the bodies stored with a range of entries."""

from __future__ import annotations

from typing import Any

from overt.ledger.canonical import digest_text
from overt.ledger.chain import body_text
from overt.ledger.reads import replay
from tests.conftest import run
from tests.ledger.reads.records import ended, started, turn


def test_the_entries_of_several_turns_come_grouped_by_turn_in_order(ledger: Any) -> None:
    ledger.record_sync([started("t1", "s"), started("t2", "s"), ended("t1", "s"),
                        started("t3", "s")])
    found = run(replay.turns_entries(ledger, ["t1", "t2", "nowhere"]))
    assert {t: [(e.seq, e.kind) for e in es] for t, es in found.items()} == {
        "t1": [(1, "turn.started"), (3, "turn.completed")], "t2": [(2, "turn.started")],
        "nowhere": []}
    assert found["t1"] == run(ledger.entries(turn_id="t1"))


def test_the_bodies_stored_with_a_range_of_entries_are_read_at_once(ledger: Any) -> None:
    turn(ledger, "t1", "s", message="first question", reply="first answer")
    turn(ledger, "t2", "s", message="second question", reply="second answer")
    [t2_start, _] = run(ledger.entries(turn_id="t2"))

    def bodies(first: int, last: int) -> dict[str, str | None]:
        return {b.digest: body_text(b.body)
                for b in run(replay.bodies_between(ledger, first, last))}

    assert bodies(t2_start.seq, t2_start.seq + 1) == {
        digest_text("second question"): "second question",
        digest_text("second answer"): "second answer"}
    assert set(bodies(1, t2_start.seq + 1)) == {
        digest_text(b) for b in ("first question", "first answer", "second question",
                                 "second answer")}
    assert bodies(1000, 2000) == {}
