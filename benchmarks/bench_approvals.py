"""Operational reads of approvals on a large ledger, on each backend.

What is timed: listing the approval requests (every one, and the pending ones:
``GET /v1/approvals``, the cockpit's page, ``overt approvals list``, and
:meth:`overt.runtime.Runtime.expire_due` / ``resume_pending``), and a sweep of
:func:`overt.channels.delivery.deliver_pending` (run on each resumption in ``overt
serve`` and each poll of ``overt email poll``), on a ledger of about 200,000
entries holding 100 approval requests: 90 from turns (their paused replies on
record), 10 from direct calls; 60 approved and taken up (their resumed answers
delivered), 40 pending. The rest of the ledger is 50,000 finished turns of one tool
call and one reply each, recorded as a busy server records them, the approvals
halfway through.

Without the indexes of what they concern (``audit_log_direct_calls``,
``audit_log_paused_replies``) both reads would go through every ``tool_call.*``,
``turn.completed`` and ``channel.replied`` entry of the ledger; they read the approval
kinds and what the requests name (see :meth:`overt.policy.approvals.ApprovalBook.list`).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks._pg import scratch_schema, unreachable
from benchmarks._stats import row
from overt.channels.delivery import deliver_pending
from overt.events import ChannelReplied, Event, ToolCallCompleted, ToolCallStarted, TurnCompleted
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import IncomingMessage

NOISE_TURNS = int(os.environ.get("OVERT_BENCH_APPROVALS_TURNS", "50000"))
"""Unrelated turns: four entries each (a call started and completed, the turn
completed, its reply), so 50,000 make 200,000 entries."""
TURN_REQUESTS, DIRECT_REQUESTS, APPROVED = 90, 10, 60
RUNS = 5
BATCH = 2000


@tool
def send_payment(amount: int, to: str) -> str:
    """Send money.

    Args:
        amount: in cents
        to: who gets it
    """
    return f"sent {amount} to {to}"


class _Replier:
    source = "slack_dm"

    async def send_reply(self, target: Mapping[str, str], text: str, *,
                         key: str = "") -> dict[str, str]:
        return {"ts": key}


def _noise(first: int, last: int) -> list[Event]:
    events: list[Event] = []
    for n in range(first, last):
        turn, call_id = f"noise-{n}", f"call_noise{n}"
        call: dict[str, Any] = {"turn_id": turn, "session_id": f"s{n % 400}",
                                "tool_call_id": call_id, "tool_name": "lookup",
                                "triggered_by": "slack_dm", "caller_session_id": "s",
                                "args_sha256": "sha256:0"}
        events += [ToolCallStarted(**call), ToolCallCompleted(
            **call, tool_status="ok", tool_duration_ms=1.0, exc_type=None, result_digest=None)]
        events.append(TurnCompleted(
            turn_id=turn, session_id=call["session_id"], status="completed",
            reply_digest=None, tools_used=["lookup"], tool_calls=1, model_calls=1,
            input_tokens=1, output_tokens=1, cost_usd=0.0, duration_ms=1.0))
        events.append(ChannelReplied(
            turn_id=turn, session_id=call["session_id"], claim=f"slack:Ev{n}",
            source="slack_dm", target={"channel": "D1", "thread_ts": f"{n}.0"},
            reply_ids={"ts": f"{n}.1"}))
    return events


async def _record_noise(ledger: Ledger, first: int, last: int) -> None:
    for start in range(first, last, BATCH // 4):
        await ledger.record(_noise(start, min(start + BATCH // 4, last)))


async def _fill(url: str) -> None:
    ledger = open_ledger(url)
    gate = Gate(Policy([]), Capabilities(None), approval_ttl_s=3600.0)
    pay = {"tool_calls": [{"name": "send_payment", "arguments": {"amount": 5, "to": "bob"}}]}
    runtime = Runtime(model=ScriptedModel([pay] * TURN_REQUESTS + ["Paid."] * APPROVED),
                      ledger=ledger, tools=[send_payment], gate=gate)
    try:
        await _record_noise(ledger, 0, NOISE_TURNS // 2)
        for n in range(TURN_REQUESTS):
            paused = await runtime.respond(IncomingMessage(
                "cli", f"pay bob {n}", {"session_id": f"pay{n}"}))
            await ledger.record([ChannelReplied(  # as the Slack channel records its reply
                turn_id=paused.turn_id, session_id=paused.session_id, claim=f"slack:Ep{n}",
                source="slack_dm", target={"channel": "D1", "thread_ts": f"p{n}"},
                reply_ids={"ts": f"p{n}.1"}, awaiting_approval=paused.awaiting_approval)])
        for n in range(DIRECT_REQUESTS):
            await runtime.call_tool("send_payment", {"amount": n, "to": "dan"})
        await deliver_pending(runtime, {"slack_dm": _Replier()})
        for request in (await runtime.approvals.list())[:APPROVED]:
            await runtime.approve(request.request_id)
        await deliver_pending(runtime, {"slack_dm": _Replier()})  # answers delivered
        await _record_noise(ledger, NOISE_TURNS // 2, NOISE_TURNS)
    finally:
        await runtime.close()


async def _time(url: str) -> dict[str, float]:
    runtime = Runtime(model=ScriptedModel([]), ledger=open_ledger(url), tools=[send_payment])
    repliers = {"slack_dm": _Replier()}
    samples: dict[str, list[float]] = {"approvals list (all)": [],
                                       "approvals list (pending)": [],
                                       "delivery sweep": []}
    try:
        for _ in range(RUNS):
            start = time.perf_counter()
            listed = await runtime.approvals.list()
            samples["approvals list (all)"].append(time.perf_counter() - start)
            assert len(listed) == TURN_REQUESTS + DIRECT_REQUESTS, len(listed)
            start = time.perf_counter()
            pending = await runtime.approvals.list(["pending"])
            samples["approvals list (pending)"].append(time.perf_counter() - start)
            assert len(pending) == TURN_REQUESTS + DIRECT_REQUESTS - APPROVED, len(pending)
            start = time.perf_counter()
            assert await deliver_pending(runtime, repliers) == []
            samples["delivery sweep"].append(time.perf_counter() - start)
    finally:
        await runtime.close()
    return {label: statistics.median(values) * 1000 for label, values in samples.items()}


def _report(backend: str, url: str) -> dict[str, float]:
    started = time.perf_counter()
    asyncio.run(_fill(url))
    row(f"{backend}, ledger filled", f"{NOISE_TURNS * 4:,} entries + 100 approvals in "
        f"{time.perf_counter() - started:.0f} s")
    figures = asyncio.run(_time(url))
    for label, median in figures.items():
        row(f"{backend}, {label}", f"median {median:9.1f} ms   (n={RUNS})")
    return {f"{backend}, {label}": median for label, median in figures.items()}


def main() -> dict[str, Any]:
    print(f"approvals: reads of {TURN_REQUESTS + DIRECT_REQUESTS} approval requests on a "
          f"ledger of {NOISE_TURNS * 4:,} other entries")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        figures.update(_report("SQLite", str(Path(tmp) / "approvals.db")))
    if (why := unreachable()) is not None:
        row("PostgreSQL", f"skipped: {why}")
        return figures
    with scratch_schema("approvals") as (url, _):
        figures.update(_report("PostgreSQL", url))
    return figures


if __name__ == "__main__":
    main()
