"""An answer that waited for an approval reaches its Slack thread once, however many
sweeps (in this process and in another one on the same ledger) try to deliver it at
the same moment, and a reply Slack refused is tried again by the next sweep."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from overt.channels.delivery import deliver_pending
from overt.channels.slack import SlackDMHandler
from overt.errors import ChannelError
from overt.events import ChannelReplyFailed
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.ledger.sql import POSTGRES, SQLITE, reply_failures
from overt.models.fake import ScriptedModel
from tests.backends import Raw
from tests.channels.helpers import payroll_runtime
from tests.channels.test_slack import OWNER, SECRET, TOKEN, event, kinds, signed, slack_app
from tests.conftest import run

PAYROLL = {"tool_calls": [{"name": "payroll", "arguments": {"month": "2026-10"}}]}


def test_sweeps_racing_in_two_processes_post_a_resumed_answer_once(
        ledger: Ledger, ledger_url: str) -> None:
    runtime = payroll_runtime(ledger, ScriptedModel([PAYROLL] * 3))
    # the operator's CLI: its own runtime on the same ledger, no Slack secrets
    operator = payroll_runtime(ledger, ScriptedModel(["Payroll was 42."] * 3))

    async def main() -> None:
        # another process: its own ledger connection and its own Slack client
        other: Any = open_ledger(ledger_url)
        try:
            async with slack_app(runtime) as (handler, fake, post):
                for n in range(3):
                    await post(*signed(event(f"payroll {n}?", event_id=f"Ev{n}",
                                             ts=f"170000010{n}.000100")))
                await fake.wait_for_posts(3)
                await handler.drain()
                for replied in await kinds(ledger, "channel.replied"):
                    await operator.approve(replied["awaiting_approval"])
                assert len(fake.posts) == 3  # the operator could not post
                elsewhere = payroll_runtime(other, ScriptedModel([]))
                their = SlackDMHandler(elsewhere, signing_secret=SECRET, bot_token=TOKEN,
                                       allowed_users=[OWNER], api_base_url=fake.base_url)
                sweeps = [deliver_pending(runtime, {"slack_dm": handler}) for _ in range(4)]
                sweeps += [deliver_pending(elsewhere, {"slack_dm": their}) for _ in range(4)]
                delivered = await asyncio.gather(*sweeps)
                assert sum(len(d) for d in delivered) == 3
                resumed = [p for p in fake.posts[3:]]
                assert sorted(p["thread_ts"] for p in resumed) == [
                    f"170000010{n}.000100" for n in range(3)]
                assert {p["text"] for p in resumed} == {"Payroll was 42."}
                assert await deliver_pending(runtime, {"slack_dm": handler}) == []
        finally:
            await other.close()
        started = await kinds(ledger, "channel.reply_started")
        assert sorted(s["claim"].rsplit(":", 1)[0] for s in started) == \
            sorted(r["claim"].rsplit(":", 1)[0] for r in await kinds(ledger, "channel.replied")
                   if r["resumed_from"])
        assert (await ledger.verify()).ok
    run(main())


def test_a_resumed_answer_slack_refused_is_sent_by_the_next_sweep(ledger: Ledger) -> None:
    runtime = payroll_runtime(ledger, ScriptedModel([PAYROLL]))
    operator = payroll_runtime(ledger, ScriptedModel(["Payroll was 42."]))

    async def main() -> None:
        async with slack_app(runtime) as (handler, fake, post):
            await post(*signed(event("what was payroll?")))
            await fake.wait_for_posts(1)
            await handler.drain()
            [replied] = await kinds(ledger, "channel.replied")
            await operator.approve(replied["awaiting_approval"])
            fake.fail_with = "ratelimited"
            with pytest.raises(ChannelError):
                await deliver_pending(runtime, {"slack_dm": handler})
            fake.fail_with = None
            assert len(await deliver_pending(runtime, {"slack_dm": handler})) == 1
            assert await deliver_pending(runtime, {"slack_dm": handler}) == []
            assert [p["text"] for p in fake.posts][1:] == ["Payroll was 42."]
        claim = f"slack:Ev001:resumed:{replied['awaiting_approval']}"
        [failed] = await kinds(ledger, "channel.reply_failed")
        assert failed["reply_claim"] == claim
        assert [s["claim"] for s in await kinds(ledger, "channel.reply_started")] == [
            f"{claim}#1", f"{claim}#2"]
    run(main())


def test_a_sweep_counts_one_replys_failures_through_an_index_of_them(
        ledger: Ledger, raw: Raw) -> None:
    """Each attempt's number counts the failures of its reply: read through
    ``audit_log_reply_failures``, not by reading every failure ever recorded."""
    async def main() -> None:
        for n in range(30):
            await ledger.record([ChannelReplyFailed(
                source="slack_dm", target={"channel": "D1"}, error_type="TimeoutError",
                reply_claim=f"slack:Ev{n}:resumed:R{n}")])
        for _ in range(2):
            await ledger.record([ChannelReplyFailed(
                source="slack_dm", target={"channel": "D1"}, error_type="TimeoutError",
                reply_claim="slack:Ev7:resumed:R7")])
        await ledger.record([ChannelReplyFailed(
            source="slack_dm", target={"channel": "D1"}, error_type="TimeoutError")])
        assert await ledger.reply_failures("slack:Ev7:resumed:R7") == 3
        assert await ledger.reply_failures("slack:Ev8:resumed:R8") == 1
        assert await ledger.reply_failures("slack:nothing") == 0
    run(main())
    dialect = POSTGRES if raw.pg else SQLITE
    statement = reply_failures(dialect).replace(dialect.ph, "'slack:Ev7:resumed:R7'")
    if raw.pg:
        raw.execute("ANALYZE audit_log")  # as autovacuum does: the index's statistics
        raw.execute("SET enable_seqscan = off")  # a table this small is read whole otherwise
        plan = " ".join(r[0] for r in raw.query(f"EXPLAIN {statement}"))
    else:
        plan = " ".join(r[3] for r in raw.query(f"EXPLAIN QUERY PLAN {statement}"))
    assert "audit_log_reply_failures" in plan, plan
