"""Which session a Slack DM continues, and whose it is: signed Events API requests over
real HTTP, replies posted to a local Slack Web API."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from overt.config.file import ConfigFileError, parse, values
from overt.ledger.base import Ledger
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.sessions.book import list_sessions, session_info
from tests.channels.helpers import echo_model, said
from tests.channels.test_slack import DM, OWNER, event, signed, slack_app
from tests.conftest import RuntimeFactory, run

NOW = int(time.time())


@pytest.fixture(autouse=True)
def _now() -> None:
    """Each test's clock starts when the test does: a thread's root is looked up
    within minutes of its messages' ``ts``, and a long run reaches a test well after
    this module was collected."""
    global NOW
    NOW = int(time.time())


def ts(offset_s: int, n: int = 100) -> str:
    """A Slack ``ts`` ``offset_s`` seconds from the test's start (threads are looked
    up near it)."""
    return f"{NOW + offset_s}.{n:06d}"


def test_main_pane_dms_continue_one_session_until_a_pause_and_a_thread_keeps_its_own(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    model = echo_model()
    runtime = make_runtime(model)
    name, ask, later, thread, back = ts(0), ts(60), ts(60 + 2000), ts(60 + 2010), ts(2080)
    messages = [("my name is Ada", name, None), ("what is my name?", ask, None),
                ("a new topic", later, None), ("and here?", thread, ask),
                ("back in the main pane", back, None)]

    async def main() -> list[dict[str, Any]]:
        async with slack_app(runtime) as (handler, fake, post):
            for n, (text, at, under) in enumerate(messages, 1):
                extra = {"thread_ts": under} if under else {}
                status, _ = await post(*signed(event(text, event_id=f"Ev{n}", ts=at, **extra)))
                assert status == 200
                await fake.wait_for_posts(n)
                await handler.drain()
            return fake.posts
    posts = run(main())
    # overt answers each in its thread, as before
    assert [p["thread_ts"] for p in posts] == [name, ask, later, ask, back]
    # typed in the main pane a minute later: the conversation so far
    assert said(model.requests[1]) == [("user", "my name is Ada"),
                                       ("assistant", "re: my name is Ada"),
                                       ("user", "what is my name?")]
    # over half an hour later: a new conversation
    assert said(model.requests[2]) == [("user", "a new topic")]
    # in the thread under the second message: that message's conversation
    assert said(model.requests[3])[-3:] == [("user", "what is my name?"),
                                            ("assistant", "re: what is my name?"),
                                            ("user", "and here?")]
    assert ("user", "a new topic") not in said(model.requests[3])
    # the main pane goes on with its own conversation, not the thread's
    assert said(model.requests[4]) == [("user", "a new topic"),
                                       ("assistant", "re: a new topic"),
                                       ("user", "back in the main pane")]
    sessions = [e.session_id for e in run(ledger.entries(kinds=["turn.started"]))]
    first, second = f"slack:{DM}:{name}", f"slack:{DM}:{later}"
    assert sessions == [first, first, second, first, second]


def test_the_pause_that_ends_a_main_pane_conversation_is_configurable(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    model = echo_model()
    runtime = make_runtime(model)

    async def main() -> None:
        async with slack_app(runtime, dm_session_idle_s=30) as (handler, fake, post):
            for n, at in enumerate((ts(0), ts(20), ts(60)), 1):
                await post(*signed(event(f"message {n}", event_id=f"Ev{n}", ts=at)))
                await fake.wait_for_posts(n)
                await handler.drain()
    run(main())
    sessions = [e.session_id for e in run(ledger.entries(kinds=["turn.started"]))]
    assert sessions == [f"slack:{DM}:{ts(0)}"] * 2 + [f"slack:{DM}:{ts(60)}"]


def test_another_users_main_pane_dm_never_joins_a_conversation(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    runtime = make_runtime(echo_model())

    async def main() -> None:
        async with slack_app(runtime, allowed_users=(OWNER, "U0OTHER")) as (handler, fake,
                                                                             post):
            await post(*signed(event("mine", event_id="Ev1", ts=ts(0))))
            await fake.wait_for_posts(1)
            await handler.drain()
            await post(*signed(event("theirs", event_id="Ev2", ts=ts(5), user="U0OTHER")))
            await fake.wait_for_posts(2)
            await handler.drain()
    run(main())
    sessions = [e.session_id for e in run(ledger.entries(kinds=["turn.started"]))]
    assert sessions == [f"slack:{DM}:{ts(0)}", f"slack:{DM}:{ts(5)}"]


ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"


def test_mapped_slack_users_own_their_sessions_and_an_unmapped_one_gets_the_default(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    # people, not operators of the deployment: each may ask and read their own sessions
    people = ("agent.ask", "trail.read", "approvals.read")
    gate = Gate(Policy([]), Capabilities({"operator:alice": people, "operator:bob": people,
                                          "operator:guest": people}))
    runtime = make_runtime(echo_model(), gate=gate)
    who = {ALICE: "D0ALICE", BOB: "D0BOB", CAROL: "D0CAROL"}

    async def main() -> None:
        async with slack_app(runtime, allowed_users=tuple(who),
                             actors={ALICE: "operator:alice", BOB: "operator:bob"},
                             default_actor="operator:guest") as (handler, fake, post):
            for n, (user, channel) in enumerate(who.items(), 1):
                await post(*signed(event(f"hello from {user}", event_id=f"Ev{n}", user=user,
                                         channel=channel, ts=ts(n))))
                await fake.wait_for_posts(n)
                await handler.drain()
    run(main())
    owners = {s: run(session_info(ledger, f"slack:{c}:{ts(n)}"))
              for n, (s, c) in enumerate(who.items(), 1)}
    assert {s: i.owner for s, i in owners.items() if i is not None} == {
        ALICE: "operator:alice", BOB: "operator:bob", CAROL: "operator:guest"}
    mine = run(list_sessions(ledger, owner="operator:alice"))
    assert [s.session_id for s in mine] == [f"slack:D0ALICE:{ts(1)}"]
    started = [e.data["actor"] for e in run(ledger.entries(kinds=["turn.started"]))]
    assert started == ["operator:alice", "operator:bob", "operator:guest"]


def test_without_a_default_actor_an_unmapped_user_is_the_operator(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    runtime = make_runtime(echo_model())

    async def main() -> None:
        async with slack_app(runtime, actors={"U0SOMEONE": "operator:someone"}) as (
                handler, fake, post):
            await post(*signed(event("hello", ts=ts(0))))
            await fake.wait_for_posts(1)
            await handler.drain()
    run(main())
    [started] = run(ledger.entries(kinds=["turn.started"]))
    assert started.data["actor"] == str(runtime.operator)


def test_slack_actors_and_the_pause_are_read_from_overt_toml(tmp_path: Path) -> None:
    config = values(parse('''
[slack]
allowed_users = ["U0ALICE", "U0CAROL"]
actors = { U0ALICE = "operator:alice" }
default_actor = "operator:guest"
dm_session_idle_s = 600
'''))
    slack: Any = config["slack"]
    assert slack.actors == (("U0ALICE", "operator:alice"),)
    assert (slack.default_actor, slack.dm_session_idle_s) == ("operator:guest", 600)
    default: Any = values(parse("[slack]\n"))["slack"]
    assert default.dm_session_idle_s == 1800
    with pytest.raises(ConfigFileError, match="actors"):
        parse('[slack]\nactors = { U0ALICE = "alice" }\n')
    with pytest.raises(ConfigFileError, match="dm_session_idle_s"):
        parse("[slack]\ndm_session_idle_s = -1\n")


def test_a_user_whose_actor_may_not_ask_is_recorded_refused_and_not_answered(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    gate = Gate(Policy([]), Capabilities({"operator:alice": ("agent.ask",),
                                          "operator:viewer": ("trail.read",)}))
    runtime = make_runtime(echo_model(), gate=gate)

    async def main() -> list[dict[str, Any]]:
        async with slack_app(runtime, allowed_users=(ALICE, BOB),
                             actors={ALICE: "operator:alice", BOB: "operator:viewer"}) as (
                handler, fake, post):
            await post(*signed(event("may I?", event_id="EvBOB", user=BOB, ts=ts(0))))
            await post(*signed(event("and I?", event_id="EvALICE", user=ALICE,
                                     channel="D0ALICE", ts=ts(1))))
            posts = await fake.wait_for_posts(1)
            await handler.drain()
            return posts
    posts = run(main())
    assert [p["channel"] for p in posts] == ["D0ALICE"]
    received = {e.data["claim"]: e.data["filtered"]
                for e in run(ledger.entries(kinds=["channel.received"]))}
    assert received == {"slack:EvBOB": "sender_not_allowed", "slack:EvALICE": None}
    [refused] = [e.data for e in run(ledger.entries(kinds=["capability.checked"]))]
    assert (refused["actor"], refused["capability"], refused["granted"], refused["subject"]) == (
        "operator:viewer", "agent.ask", False, "slack:EvBOB")
    assert [e.data["actor"] for e in run(ledger.entries(kinds=["turn.started"]))] == [
        "operator:alice"]
