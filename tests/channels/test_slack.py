"""The Slack DM channel end to end: requests signed with slack_sdk over real HTTP to the
Events API endpoint, replies posted by slack_sdk's AsyncWebClient to a local Slack API."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from slack_sdk.signature import SignatureVerifier

from overt.channels.delivery import deliver_pending, deliver_resumed
from overt.channels.slack import SlackDMHandler, slack_routes
from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel, ScriptedModel
from overt.runtime import Runtime
from overt.tools import tool
from overt.types import ModelRequest
from tests.channels.fake_slack import FakeSlack, fake_slack_api, serve
from tests.channels.helpers import echo_model, payroll_runtime, said
from tests.conftest import RuntimeFactory, run

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-test-token"
OWNER = "U0OWNER"
DM = "D0DM"


def event(text: str = "how is my disk?", *, event_id: str = "Ev001", user: str = OWNER,
          channel: str = DM, channel_type: str = "im", ts: str = "1700000100.000100",
          **extra: Any) -> dict[str, Any]:
    return {"token": "legacy", "team_id": "T0TEAM", "api_app_id": "A0APP",
            "type": "event_callback", "event_id": event_id, "event_time": 1700000100,
            "event": {"type": "message", "user": user, "text": text, "ts": ts,
                      "event_ts": ts, "channel": channel, "channel_type": channel_type,
                      **extra}}


def signed(payload: dict[str, Any], *, secret: str = SECRET, age_s: int = 0,
           retry: int | None = None) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    timestamp = str(int(time.time()) - age_s)
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    assert signature is not None
    headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": timestamp,
               "X-Slack-Signature": signature}
    if retry is not None:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    return body, headers


Post = Callable[[bytes, dict[str, str]], Awaitable[tuple[int, dict[str, Any]]]]


@asynccontextmanager
async def slack_app(runtime: Runtime, *, allowed_users: tuple[str, ...] = (OWNER,),
                    **options: Any) -> AsyncIterator[tuple[SlackDMHandler, FakeSlack, Post]]:
    """The handler (``options``: its keyword arguments) behind a real server, a local
    Slack API, and a function posting to the endpoint."""
    async with fake_slack_api(TOKEN) as fake:
        handler = SlackDMHandler(runtime, signing_secret=SECRET, bot_token=TOKEN,
                                 allowed_users=allowed_users, api_base_url=fake.base_url,
                                 **options)
        async with serve(slack_routes(handler)) as url, aiohttp.ClientSession() as http:
            async def post(body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
                async with http.post(f"{url}/slack/events", data=body,
                                     headers=headers) as response:
                    return response.status, await response.json()
            yield handler, fake, post
            await handler.drain()


async def kinds(ledger: Ledger, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in await ledger.entries(kinds=[kind])]


def test_a_signed_url_verification_gets_its_challenge_back(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(ScriptedModel([]))

    async def main() -> None:
        async with slack_app(runtime) as (_, _, post):
            status, body = await post(*signed({"type": "url_verification",
                                               "challenge": "3eZbrw1aBm2rZgRNFdxV"}))
            assert (status, body) == (200, {"challenge": "3eZbrw1aBm2rZgRNFdxV"})
    run(main())


def test_a_dm_from_an_allowed_user_is_answered_in_its_thread_and_recorded(
        make_runtime: RuntimeFactory, ledger: Ledger, tmp_path: Path) -> None:
    @tool(read_only=True)
    async def disk_free(path: str) -> dict[str, int]:
        """Free bytes.

        Args:
            path: a path.
        """
        return {"free": 123}

    runtime = make_runtime(ScriptedModel([
        {"tool_calls": [{"name": "disk_free", "arguments": {"path": "/"}}]},
        "You have plenty of space."]), [disk_free])

    async def main() -> None:
        async with slack_app(runtime) as (handler, fake, post):
            status, _ = await post(*signed(event("secret-marker: how is my disk?")))
            assert status == 200
            posts = await fake.wait_for_posts(1)
            await handler.drain()
        assert posts == [{"channel": DM, "text": "You have plenty of space.",
                          "thread_ts": "1700000100.000100", "ts": "1700000000.000001"}]
        [received] = await kinds(ledger, "channel.received")
        assert received["claim"] == "slack:Ev001" and received["filtered"] is None
        assert received["caller_session_id"] == f"{DM}:1700000100.000100"
        [replied] = await kinds(ledger, "channel.replied")
        assert replied["target"] == {"channel": DM, "thread_ts": "1700000100.000100"}
        assert replied["reply_ids"] == {"channel": DM, "ts": "1700000000.000001"}
        for entry in await ledger.entries(kinds=["channel.received", "channel.replied"]):
            assert "secret-marker" not in json.dumps(entry.data)
    run(main())
    [line] = [json.loads(x) for x in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert line["source"] == "slack_dm" and line["tools_used"] == ["disk_free"]
    assert line["channel"] == {"channel": DM, "thread_ts": "1700000100.000100",
                               "event_id": "Ev001"}


def test_forged_stale_and_unsigned_requests_are_rejected_and_not_recorded(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    runtime = make_runtime(ScriptedModel(["never"]))

    async def main() -> None:
        async with slack_app(runtime) as (_, fake, post):
            forged = signed(event(), secret="not-the-secret")
            stale = signed(event(event_id="Ev002"), age_s=6 * 60)
            body, headers = signed(event(event_id="Ev003"))
            tampered = (body.replace(b"how is", b"delete"), headers)
            unsigned = (body, {"Content-Type": "application/json"})
            for request in (forged, stale, tampered, unsigned):
                status, answer = await post(*request)
                assert (status, answer["error"]) == (401, "invalid_signature")
            assert fake.posts == []
        assert await kinds(ledger, "channel.received") == []
    run(main())


def test_a_retried_or_replayed_event_is_answered_once(make_runtime: RuntimeFactory,
                                                     ledger: Ledger) -> None:
    runtime = make_runtime(ScriptedModel(["Once.", "Twice!"]))

    async def main() -> None:
        async with slack_app(runtime) as (handler, fake, post):
            first = signed(event())
            assert (await post(*first))[0] == 200
            assert await post(*first) == (200, {"ok": True, "duplicate": True})  # replayed
            retry = signed(event(), retry=1)
            assert await post(*retry) == (200, {"ok": True, "duplicate": True})
            await handler.drain()
            assert [p["text"] for p in fake.posts] == ["Once."]
        assert len(await kinds(ledger, "channel.received")) == 1
        assert len(await kinds(ledger, "channel.replied")) == 1
    run(main())


def test_the_request_is_acknowledged_before_the_turn_finishes(
        make_runtime: RuntimeFactory) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        started.set()
        await release.wait()
        return "Done thinking."

    runtime = make_runtime(FunctionModel(slow))

    async def main() -> None:
        async with slack_app(runtime) as (_, fake, post):
            assert (await asyncio.wait_for(post(*signed(event())), 3))[0] == 200
            await asyncio.wait_for(started.wait(), 10)
            assert fake.posts == []  # acknowledged while the model is still working
            release.set()
            assert [p["text"] for p in await fake.wait_for_posts(1)] == ["Done thinking."]
    run(main())


def test_messages_not_to_answer_are_recorded_as_filtered_without_their_text(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    runtime = make_runtime(ScriptedModel(["should not be used"]))

    async def main() -> None:
        async with slack_app(runtime) as (handler, fake, post):
            for request in (
                event("stranger-text", event_id="Ev010", user="U0STRANGER"),
                event("channel-text", event_id="Ev011", channel="C0PUBLIC",
                      channel_type="channel"),
                event("bot-text", event_id="Ev012", bot_id="B0BOT"),
                event("edit-text", event_id="Ev013", subtype="message_changed"),
            ):
                assert (await post(*signed(request)))[0] == 200
            await handler.drain()
            assert fake.posts == []
        received = await kinds(ledger, "channel.received")
        assert [(r["claim"], r["filtered"]) for r in received] == [
            ("slack:Ev010", "sender_not_allowed"), ("slack:Ev011", "not_direct_message"),
            ("slack:Ev012", "bot_message"), ("slack:Ev013", "not_a_message")]
        assert "-text" not in json.dumps(received)
        assert await ledger.entries(kinds=["turn.started"]) == []
    run(main())


def test_a_reply_slack_refuses_is_recorded_as_failed(make_runtime: RuntimeFactory,
                                                     ledger: Ledger) -> None:
    runtime = make_runtime(ScriptedModel(["Hello."]))

    async def main() -> None:
        async with slack_app(runtime) as (handler, fake, post):
            fake.fail_with = "channel_not_found"
            assert (await post(*signed(event())))[0] == 200
            await handler.drain()
        [failed] = await kinds(ledger, "channel.reply_failed")
        assert failed["error_code"] == "channel_not_found"
        assert failed["error_type"] == "SlackApiError"
        assert await kinds(ledger, "channel.replied") == []
    run(main())


def test_an_answer_that_waited_for_approval_is_posted_to_the_same_thread_once(
        ledger: Ledger, tmp_path: Path) -> None:
    runtime = payroll_runtime(ledger, ScriptedModel([
        {"tool_calls": [{"name": "payroll", "arguments": {"month": "2026-10"}}]},
        "Payroll for October was 42."]))

    async def main() -> None:
        async with slack_app(runtime) as (handler, fake, post):
            await post(*signed(event("what was payroll?", ts="1700000200.000200",
                                     thread_ts="1700000100.000100")))
            [waiting] = await fake.wait_for_posts(1)
            await handler.drain()
            assert "approval" in waiting["text"]
            [replied] = await kinds(ledger, "channel.replied")
            request_id = replied["awaiting_approval"]
            assert request_id is not None
            resumed = await runtime.approve(request_id)
            ids = await deliver_resumed(resumed, ledger, {"slack_dm": handler})
            assert ids == {"channel": DM, "ts": "1700000000.000002"}
            assert await deliver_resumed(resumed, ledger, {"slack_dm": handler}) is None
            assert [(p["text"], p["thread_ts"]) for p in fake.posts] == [
                (waiting["text"], "1700000100.000100"),
                ("Payroll for October was 42.", "1700000100.000100")]
        replies = await kinds(ledger, "channel.replied")
        assert [r["claim"] for r in replies] == [
            "slack:Ev001", f"slack:Ev001:resumed:{request_id}"]
        assert replies[1]["resumed_from"] == request_id
    run(main())


def test_an_answer_approved_in_another_process_is_delivered_by_the_next_sweep(
        ledger: Ledger, tmp_path: Path) -> None:
    runtime = payroll_runtime(ledger, ScriptedModel([
        {"tool_calls": [{"name": "payroll", "arguments": {"month": "2026-10"}}]}]))
    # the operator's CLI: its own runtime on the same ledger, no Slack secrets
    operator = payroll_runtime(ledger, ScriptedModel(["Payroll was 42."]))

    async def main() -> None:
        async with slack_app(runtime) as (handler, fake, post):
            await post(*signed(event("what was payroll?")))
            await fake.wait_for_posts(1)
            await handler.drain()
            [replied] = await kinds(ledger, "channel.replied")
            await operator.approve(replied["awaiting_approval"])
            assert len(fake.posts) == 1  # the other process could not post
            delivered = await deliver_pending(runtime, {"slack_dm": handler})
            assert len(delivered) == 1
            assert await deliver_pending(runtime, {"slack_dm": handler}) == []
            assert [p["text"] for p in fake.posts][1:] == ["Payroll was 42."]
    run(main())


def test_a_reply_in_the_dm_thread_reaches_the_model_with_the_thread_so_far(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    model = echo_model()
    runtime = make_runtime(model)
    root = "1700000100.000100"

    async def main() -> list[dict[str, Any]]:
        async with slack_app(runtime) as (handler, fake, post):
            await post(*signed(event("my name is Ada", event_id="Ev1", ts=root)))
            await fake.wait_for_posts(1)
            await handler.drain()
            await post(*signed(event("what is my name?", event_id="Ev2",
                                     ts="1700000200.000200", thread_ts=root)))
            await fake.wait_for_posts(2)
            await handler.drain()
            await post(*signed(event("a new question", event_id="Ev3",
                                     ts="1700009000.000300")))
            posts = await fake.wait_for_posts(3)
            await handler.drain()
            return posts
    posts = run(main())
    assert [p["thread_ts"] for p in posts] == [root, root, "1700009000.000300"]
    assert said(model.requests[1]) == [("user", "my name is Ada"),
                                       ("assistant", "re: my name is Ada"),
                                       ("user", "what is my name?")]
    # a main-pane DM two hours later: the pause ended the conversation
    assert said(model.requests[2]) == [("user", "a new question")]
    sessions = [e.session_id for e in run(ledger.entries(kinds=["turn.started"]))]
    assert sessions == [f"slack:{DM}:{root}"] * 2 + [f"slack:{DM}:1700009000.000300"]
