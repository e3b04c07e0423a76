"""The cockpit's reads of the chain, on both backends: its size, what was appended past
an entry, one entry by number, the newest entry of a kind."""

from __future__ import annotations

from typing import Any

from overt.ledger.reads import web
from tests.conftest import run
from tests.ledger.reads.records import ended, started


def test_an_empty_ledger_has_no_size_no_head_and_no_entries(ledger: Any) -> None:
    assert run(web.size(ledger)) == web.Size(0, 0)
    assert run(web.head(ledger)) == 0
    assert run(web.entries_after(ledger, 0, 10)) == []
    assert run(web.entry_at(ledger, 1)) is None
    assert run(web.newest_of_kind(ledger, "turn.started")) is None


def test_the_entries_after_one_come_oldest_first_up_to_the_limit(ledger: Any) -> None:
    ledger.record_sync([started("t1", "s"), ended("t1", "s"), started("t2", "s")])
    assert run(web.size(ledger)) == web.Size(3, 3)
    assert run(web.head(ledger)) == 3
    after = run(web.entries_after(ledger, 1, 10))
    assert [(e.seq, e.kind, e.turn_id) for e in after] == [
        (2, "turn.completed", "t1"), (3, "turn.started", "t2")]
    assert [e.seq for e in run(web.entries_after(ledger, 0, 2))] == [1, 2]
    assert run(web.entries_after(ledger, 3, 10)) == []


def test_an_entry_is_read_by_its_number_as_the_ledger_stored_it(ledger: Any) -> None:
    ledger.record_sync([started("t1", "s"), ended("t1", "s")])
    [first, second] = run(ledger.entries(turn_id="t1"))
    assert run(web.entry_at(ledger, 2)) == second
    assert run(web.entry_at(ledger, 1)) == first
    assert run(web.entry_at(ledger, 3)) is None


def test_the_newest_entry_of_a_kind_is_the_last_recorded(ledger: Any) -> None:
    ledger.record_sync([started("t1", "s"), ended("t1", "s"), started("t2", "s"),
                        ended("t2", "s", "model_error")])
    found = run(web.newest_of_kind(ledger, "turn.started"))
    assert found is not None and (found.seq, found.turn_id) == (3, "t2")
    assert run(web.newest_of_kind(ledger, "ledger.checkpoint")) is None
