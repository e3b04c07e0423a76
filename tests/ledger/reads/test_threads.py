"""The entries a channel's message is threaded by, on both backends: the session of an
email reply overt sent, and of Slack DM messages it received."""

from __future__ import annotations

from typing import Any

from overt.clock import iso_after
from overt.events import ChannelReceived, ChannelReplied
from overt.ledger.reads import threads
from tests.conftest import run


def _received(claim: str, session: str, *, ts: str, thread_ts: str, sender: str = "U1",
              channel: str = "D1", filtered: Any = None) -> ChannelReceived:
    return ChannelReceived(session_id=session, claim=claim, source="slack_dm",
                           caller_session_id=f"slack:{channel}", sender=sender,
                           channel_ids={"channel_id": channel, "ts": ts, "thread_ts": thread_ts},
                           filtered=filtered)


def test_an_email_reply_names_the_session_it_was_sent_from(ledger: Any) -> None:
    ledger.record_sync([ChannelReplied(session_id="s1", claim="r1", source="email",
                                       target={"message_id": "<m1@x>"},
                                       reply_ids={"message_id": "<overt.1@example.org>"}),
                        ChannelReplied(session_id="s2", claim="r2", source="slack_dm",
                                       target={}, reply_ids={"message_id": "<overt.2@x>"})])
    assert run(threads.email_reply_session(ledger, "<overt.1@example.org>")) == "s1"
    assert run(threads.email_reply_session(ledger, "<overt.2@x>")) is None  # not email
    assert run(threads.email_reply_session(ledger, "<overt.3@x>")) is None


def test_slack_messages_are_found_by_sender_channel_and_ts(ledger: Any) -> None:
    ledger.record_sync([
        _received("c1", "s1", ts="100.1", thread_ts="100.1"),
        _received("c2", "s2", ts="200.1", thread_ts="200.1"),
        _received("c3", "s3", ts="300.1", thread_ts="100.1"),  # in a thread: not the pane
        _received("c4", "s4", ts="400.1", thread_ts="400.1", filtered="sender_not_allowed"),
        _received("c5", "s5", ts="500.1", thread_ts="500.1", sender="U2"),
    ])
    since = iso_after(-60)
    last = run(threads.slack_last_main_pane(ledger, channel="D1", user="U1", since=since))
    assert last == threads.SlackMessage("s2", "200.1")
    assert run(threads.slack_last_main_pane(ledger, channel="D2", user="U1",
                                            since=since)) is None
    assert run(threads.slack_last_main_pane(ledger, channel="D1", user="U1",
                                            since=iso_after(60))) is None
    until = iso_after(60)
    assert run(threads.slack_message_session(ledger, channel="D1", ts="100.1", since=since,
                                             until=until)) == "s1"
    assert run(threads.slack_message_session(ledger, channel="D1", ts="999.9", since=since,
                                             until=until)) is None
