"""A session's conversation entries with their bodies, on both backends: read whole,
back from its end a page at a time, and brought up to date from what was read."""

from __future__ import annotations

from typing import Any

from overt.ledger.canonical import digest_text
from overt.ledger.chain import body_text
from overt.ledger.reads.conversations import (
    ConversationEntry,
    conversation,
    conversation_before,
    conversation_since,
)
from tests.conftest import run
from tests.ledger.reads.records import call, ended, started


def _session(ledger: Any) -> None:
    ledger.record_sync(
        [started("t1", "s", message="What is in rack 4?"),
         *call("t1", "s", "c1", "lookup", '{"rack": 4}', "Isokron"),
         ended("t1", "s", reply="Isokron.")],
        {digest_text(b): b for b in ("What is in rack 4?", '{"rack": 4}', "Isokron",
                                     "Isokron.")})
    ledger.record_sync([started("x1", "other", message="elsewhere")],
                       {digest_text("elsewhere"): "elsewhere"})
    ledger.record_sync([started("t2", "s", message="Thanks"), ended("t2", "s", reply="OK")],
                       {digest_text("Thanks"): "Thanks", digest_text("OK"): "OK"})


def test_a_conversation_holds_each_message_call_and_answer_with_its_body(ledger: Any) -> None:
    _session(ledger)
    found = run(conversation(ledger, "s"))
    assert all(isinstance(e, ConversationEntry) for e in found)
    assert [(e.kind, e.turn_id) for e in found] == [
        ("turn.started", "t1"), ("tool_call.completed", "t1"), ("turn.completed", "t1"),
        ("turn.started", "t2"), ("turn.completed", "t2")]
    message, done_call, answer = found[:3]
    assert body_text(message.body) == "What is in rack 4?"
    assert message.digest == digest_text("What is in rack 4?") and message.status is None
    assert (done_call.tool_call_id, done_call.tool_name, done_call.status) == ("c1", "lookup",
                                                                               "ok")
    assert body_text(done_call.body) == "Isokron"
    assert body_text(done_call.args_body) == '{"rack": 4}'
    assert done_call.args_digest == digest_text('{"rack": 4}')
    assert (body_text(answer.body), answer.status) == ("Isokron.", "completed")
    assert answer.args_body is None and answer.tool_call_id is None
    assert [e.seq for e in run(conversation(ledger, "s", after=found[2].seq))] == [
        e.seq for e in found[3:]]
    assert run(conversation(ledger, "nowhere")) == []


def test_a_conversation_is_read_back_from_its_end_a_page_at_a_time(ledger: Any) -> None:
    _session(ledger)
    whole = run(conversation(ledger, "s"))
    page = run(conversation_before(ledger, "s", 1 << 62, 2))
    assert page == whole[::-1][:2]  # newest first
    assert run(conversation_before(ledger, "s", page[-1].seq, 10)) == whole[::-1][2:]


def test_what_is_new_comes_with_the_oldest_entry_read_before(ledger: Any) -> None:
    _session(ledger)
    whole = run(conversation(ledger, "s"))
    since = run(conversation_since(ledger, "s", whole[0].seq, whole[2].seq))
    assert since == [whole[0], *whole[3:]]
    assert run(conversation_since(ledger, "s", 10_000, whole[-1].seq)) == []
