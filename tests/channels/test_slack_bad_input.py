"""Slack requests overt must not misread: each is refused with a clear error, or read
as the person wrote it. Signed with slack_sdk, posted over real HTTP to the endpoint,
in Slack's wire format (the Events API's ``event_callback`` envelope)."""

from __future__ import annotations

from typing import Any

from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from tests.channels.helpers import echo_model
from tests.channels.test_slack import event as dm_event
from tests.channels.test_slack import kinds, signed, slack_app
from tests.conftest import RuntimeFactory, run

REPORT = {"id": "F0REPORT", "created": 1700000100, "timestamp": 1700000100,
          "name": "disk-report.pdf", "title": "disk-report.pdf",
          "mimetype": "application/pdf", "filetype": "pdf", "pretty_type": "PDF",
          "user": "U0OWNER", "size": 52113, "mode": "hosted", "is_external": False,
          "url_private": "https://files.slack.com/files-pri/T0TEAM-F0REPORT/disk-report.pdf"}


def test_text_with_slack_escapes_reaches_the_model_as_the_person_wrote_it(
        make_runtime: RuntimeFactory) -> None:
    model = echo_model()
    runtime = make_runtime(model)

    async def main() -> list[str]:
        async with slack_app(runtime) as (handler, fake, post):
            # what Slack sends for: is 2 < 3 && 5 > 4?
            await post(*signed(dm_event("is 2 &lt; 3 &amp;&amp; 5 &gt; 4? &amp;lt;")))
            posts = await fake.wait_for_posts(1)
            await handler.drain()
        return [p["text"] for p in posts]
    assert run(main()) == ["re: is 2 < 3 && 5 > 4? &lt;"]


def test_a_dm_with_a_file_is_answered_and_the_model_told_of_the_file(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    runtime = make_runtime(echo_model())

    async def main() -> list[str]:
        async with slack_app(runtime) as (handler, fake, post):
            await post(*signed(dm_event("what does this report say?", event_id="Ev020",
                                        subtype="file_share", files=[REPORT], upload=False,
                                        display_as_bot=False)))
            await post(*signed(dm_event("", event_id="Ev021", ts="1700000200.000200",
                                        subtype="file_share", files=[REPORT])))
            posts = await fake.wait_for_posts(2)
            await handler.drain()
        return sorted(p["text"] for p in posts)
    assert run(main()) == [
        "re: [attached file, not read: disk-report.pdf (application/pdf)]",
        "re: what does this report say?\n"
        "[attached file, not read: disk-report.pdf (application/pdf)]"]
    assert [r["filtered"] for r in run(kinds(ledger, "channel.received"))] == [None, None]


def test_an_event_callback_overt_cannot_read_is_refused_not_claimed(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    runtime = make_runtime(ScriptedModel(["never"]))
    no_id = dm_event("first")
    del no_id["event_id"]
    no_id_either = dm_event("second", ts="1700000300.000300")
    del no_id_either["event_id"]
    null_text = dm_event(event_id="Ev030")
    null_text["event"]["text"] = None
    listed_user = dm_event(event_id="Ev031", user=["U0OWNER"])  # type: ignore[arg-type]
    no_event = dm_event(event_id="Ev032")
    no_event["event"] = "message"
    surrogate = dm_event("caf\udce9", event_id="Ev033")  # JSON's "\udce9" escape
    surrogate_ts = dm_event(event_id="Ev034", ts="\ud800")

    async def main() -> list[tuple[int, dict[str, Any]]]:
        async with slack_app(runtime) as (_, fake, post):
            answers = [await post(*signed(p)) for p in
                       (no_id, no_id_either, null_text, listed_user, no_event, surrogate,
                        surrogate_ts)]
            assert fake.posts == []
        return answers
    answers = run(main())
    assert [(s, b["error"]) for s, b in answers] == [(400, "invalid_event")] * 7
    assert [b["detail"] for _, b in answers] == [
        "event_callback without an event_id", "event_callback without an event_id",
        "message event field text is not a string", "message event field user is not a string",
        "event_callback without an event object",
        "message event field text: the text is not valid UTF-8 at character 3 (the byte 0xe9):"
        " nothing was sent; write it in UTF-8",
        "message event field ts: the text is not valid UTF-8 at character 0: nothing was sent;"
        " write it in UTF-8"]
    assert run(kinds(ledger, "channel.received")) == []


def test_bad_timestamps_challenges_and_huge_bodies_get_clear_errors(
        make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(ScriptedModel([]))

    async def main() -> list[tuple[int, Any]]:
        async with slack_app(runtime) as (_, _, post):
            body, headers = signed(dm_event())
            out = [await post(body, headers | {"X-Slack-Request-Timestamp": "soon"})]
            out.append(await post(*signed({"type": "url_verification"})))
            out.append(await post(*signed({"type": "url_verification", "challenge": 7})))
            huge = dm_event("x" * 1_100_000, event_id="Ev040")
            out.append(await post(*signed(huge)))
        return [(status, body.get("error")) for status, body in out]
    assert run(main()) == [(401, "invalid_signature"), (400, "invalid_challenge"),
                           (400, "invalid_challenge"), (413, "too_large")]

