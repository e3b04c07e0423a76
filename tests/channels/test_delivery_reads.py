"""A delivery sweep reads the paused replies whose resumed answer is still owed, not
every reply ever sent: on a ledger of thousands of replies (delivered, and paused ones
whose resumed answer went out long ago) a sweep reads a few entries, and none once
everything is delivered."""

from __future__ import annotations

from typing import Any

import pytest

from overt.channels.delivery import deliver_pending
from overt.events import ChannelReplied, Event
from overt.ledger.base import Entry, Ledger
from overt.models.fake import ScriptedModel
from tests.channels.helpers import payroll_runtime
from tests.channels.test_slack import event, kinds, signed, slack_app
from tests.conftest import run

PAYROLL = {"tool_calls": [{"name": "payroll", "arguments": {"month": "2026-10"}}]}


class Counting:
    """A ledger that counts the entries its reads return (and forwards the rest)."""

    def __init__(self, ledger: Ledger) -> None:
        self.inner = ledger
        self.read = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def entries(self, **filters: Any) -> list[Entry]:
        got = await self.inner.entries(**filters)
        self.read += len(got)
        return got

    async def unresumed_replies(self) -> list[Entry]:
        got = await self.inner.unresumed_replies()
        self.read += len(got)
        return got


def reply(claim: str, **fields: Any) -> ChannelReplied:
    return ChannelReplied(turn_id=f"t-{claim}", session_id="noise", claim=claim,
                          source="slack_dm", target={"channel": "D1", "thread_ts": "1.0"},
                          reply_ids={"ts": "2.0"}, **fields)


async def delivered_long_ago(ledger: Ledger, replies: int, paused: int) -> None:
    """``replies`` replies, and ``paused`` paused ones with their resumed answers."""
    for first in range(0, replies, 500):
        await ledger.record([reply(f"slack:Ev{n}")
                             for n in range(first, min(first + 500, replies))])
    for first in range(0, paused, 250):
        events: list[Event] = []
        for n in range(first, min(first + 250, paused)):
            events += [reply(f"slack:Ep{n}", awaiting_approval=f"R{n}"),
                       reply(f"slack:Ep{n}:resumed:R{n}", resumed_from=f"R{n}")]
        await ledger.record(events)


@pytest.mark.slow
def test_a_sweep_reads_the_replies_still_owed_not_every_reply(ledger: Ledger) -> None:
    runtime = payroll_runtime(ledger, ScriptedModel([PAYROLL]))
    operator = payroll_runtime(ledger, ScriptedModel(["Payroll was 42."]))

    async def main() -> None:
        await delivered_long_ago(ledger, 3000, 500)
        async with slack_app(runtime) as (handler, fake, post):
            await post(*signed(event("what was payroll?", event_id="EvNew")))
            await fake.wait_for_posts(1)
            await handler.drain()
            [paused] = [r for r in await kinds(ledger, "channel.replied")
                        if r["claim"] == "slack:EvNew"]
            await operator.approve(paused["awaiting_approval"])
            counting = Counting(ledger)
            runtime.ledger = counting  # type: ignore[assignment]
            assert len(await deliver_pending(runtime, {"slack_dm": handler})) == 1
            assert 0 < counting.read < 20, counting.read  # the old sweep read 4,000 replies
            counting.read = 0
            assert await deliver_pending(runtime, {"slack_dm": handler}) == []
            assert counting.read == 0  # nothing owed: nothing read
            assert [p["text"] for p in fake.posts][1:] == ["Payroll was 42."]
    run(main())
