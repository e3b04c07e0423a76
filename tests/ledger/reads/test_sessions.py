"""Sessions as the record shows them, on both backends: a session's summary and the
turn that opens it, summaries listed, filtered and searched, each session's first
turn, and counts of entries within sessions."""

from __future__ import annotations

from typing import Any

from overt.events import TurnStarted
from overt.ledger.canonical import digest_text
from overt.ledger.reads import sessions
from tests.conftest import run
from tests.ledger.reads.records import ended, started, turn


def _three(ledger: Any) -> None:
    turn(ledger, "a1", "a", message="Where is the Isokron host?", reply="Rack 4.",
         actor="operator:alice")
    turn(ledger, "b1", "b", message="hello", reply="hi", actor="mcp_client:x")
    turn(ledger, "a2", "a", message="and the backup?", reply="Rack 5.",
         actor="operator:alice")


def test_a_session_summary_counts_its_turns_and_decodes_its_first(ledger: Any) -> None:
    _three(ledger)
    found = run(sessions.session_summary(ledger, "a"))
    assert found is not None
    assert (found.session_id, found.turns, found.first_seq) == ("a", 2, 1)
    assert isinstance(found.first, TurnStarted)
    assert found.first.actor == "operator:alice" and found.first.source == "cli"
    assert found.started_at <= found.last_at
    assert run(sessions.session_summary(ledger, "nowhere")) is None


def test_the_opening_turn_is_the_first_start_and_none_without_one(ledger: Any) -> None:
    _three(ledger)
    opening = run(sessions.session_opening(ledger, "a"))
    assert opening is not None and opening.session_id == "a"
    assert opening.message_digest == digest_text("Where is the Isokron host?")
    assert run(sessions.session_opening(ledger, "nowhere")) is None
    ledger.record_sync([ended("c0", "c")])  # its start is gone (pruned): no opening
    ledger.record_sync([started("c1", "c")])
    assert run(sessions.session_opening(ledger, "c")) is None


def test_summaries_come_newest_activity_first_and_filter_as_asked(ledger: Any) -> None:
    _three(ledger)

    def listed(**filters: Any) -> list[str]:
        found = run(sessions.session_summaries(ledger, **filters))
        return [s.session_id for s in found]

    assert listed() == ["a", "b"]
    assert listed(limit=1) == ["a"]
    assert listed(owner="operator:alice") == ["a"]
    assert listed(owner="mcp_client:x") == ["b"] and listed(owner="operator:bob") == []
    assert listed(source="cli") == ["a", "b"] and listed(source="slack_dm") == []
    assert listed(since="9999-01-01") == [] and listed(until="2000-01-01") == []
    assert listed(text="ISOKRON") == ["a"]  # in a message, case aside
    assert listed(text="rack 5") == ["a"]  # in an answer
    assert listed(text="nothing like it") == []


def test_counts_and_first_starts_within_sessions(ledger: Any) -> None:
    _three(ledger)
    assert run(sessions.count_in_sessions(ledger, "turn.started", ["a", "b"])) == 3
    assert run(sessions.count_in_sessions(ledger, "turn.completed", ["b"])) == 1
    assert run(sessions.first_starts(ledger, ["a", "b", "nowhere"])) == {"a": 1, "b": 3}
    assert run(sessions.first_starts(ledger, [])) == {}
