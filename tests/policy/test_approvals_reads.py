"""Listing approval requests reads the requests and the calls and turns they name, not
every tool call and turn of the ledger: on a ledger of thousands of unrelated calls
the list reads a few dozen entries, and says the same as on a ledger without them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from overt.events import Event, ToolCallCompleted, ToolCallStarted, TurnCompleted
from overt.ledger.base import Entry, Ledger
from overt.policy.approvals import ApprovalBook
from tests.conftest import run
from tests.policy.helpers import PAY, ask, runtime


class Counting:
    """A ledger that counts the entries its reads return (and forwards the rest)."""

    def __init__(self, ledger: Ledger) -> None:
        self.inner = ledger
        self.read = 0
        self.direct_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def entries(self, **filters: Any) -> list[Entry]:
        got = await self.inner.entries(**filters)
        self.read += len(got)
        return got

    async def direct_calls(self, tool_call_ids: Sequence[str]) -> list[Entry]:
        got = await self.inner.direct_calls(tool_call_ids)
        self.read += len(got)
        self.direct_reads += 1
        return got


async def unrelated(ledger: Ledger, turns: int) -> None:
    """``turns`` finished turns of one tool call each, and as many direct calls."""
    for first in range(0, turns, 250):
        events: list[Event] = []
        for n in range(first, min(first + 250, turns)):
            for turn_id in (f"noise-{n}", None):
                call = dict(turn_id=turn_id, session_id="noise", tool_call_id=f"call_n{n}"
                            + ("" if turn_id else "d"), tool_name="lookup",
                            triggered_by="cli", caller_session_id="noise",
                            args_sha256="sha256:0")
                events += [ToolCallStarted(**call), ToolCallCompleted(  # type: ignore[arg-type]
                    **call, tool_status="ok", tool_duration_ms=1.0, exc_type=None,
                    result_digest=None)]
            events.append(TurnCompleted(
                turn_id=f"noise-{n}", session_id="noise", status="completed",
                reply_digest=None, tools_used=["lookup"], tool_calls=1, model_calls=1,
                input_tokens=1, output_tokens=1, cost_usd=0.0, duration_ms=1.0))
        await ledger.record(events)


def approvals(ledger: Ledger, tmp_path: Path) -> ApprovalBook:
    """A turn paused on a request and approved, a direct call held and approved, and a
    turn still paused; the approval book of that runtime."""
    rt = runtime(ledger, tmp_path / "payments", [PAY, "Paid bob $5.", PAY])
    approved = ask(rt)
    run(rt.approve(approved.awaiting_approval))
    held = run(rt.call_tool("send_payment", {"amount": 2, "to": "dan"}))
    run(rt.approve(held.request_id))
    ask(rt)
    return rt.approvals


def summary(book: ApprovalBook, statuses: Any = None) -> list[tuple[Any, ...]]:
    return [(r.status, r.turn_id is None, r.call_started_seq is not None, r.call_completed,
             r.taken_up_seq is not None, r.ended_after_taken_up, r.interrupted, r.unstarted,
             r.taken_up_by is not None) for r in run(book.list(statuses))]


EXPECTED = [("approved", False, True, True, True, True, False, False, True),
            ("approved", True, True, True, True, True, False, False, True),
            ("pending", False, False, False, False, False, False, False, False)]


@pytest.mark.slow
def test_the_list_reads_the_calls_of_its_requests_not_every_call_of_the_ledger(
        ledger: Ledger, tmp_path: Path) -> None:
    run(unrelated(ledger, 2000))  # 10,000 entries: a call in a turn and one outside each
    book = approvals(ledger, tmp_path)
    run(unrelated(ledger, 10))
    counting = Counting(ledger)
    listed = ApprovalBook(counting, book.capabilities)  # type: ignore[arg-type]
    assert summary(listed) == EXPECTED
    assert 0 < counting.read < 40, counting.read  # the old list read more than 10,000
    assert counting.direct_reads == 1


def test_a_pending_list_reads_no_tool_call(ledger: Ledger, tmp_path: Path) -> None:
    """A pending request's call is held until a decision releases it: the list of
    pending requests reads the approval kinds alone."""
    book = approvals(ledger, tmp_path)
    counting = Counting(ledger)
    pending = ApprovalBook(counting, book.capabilities)  # type: ignore[arg-type]
    assert summary(pending, ["pending"]) == EXPECTED[2:]
    requested = len(run(ledger.entries(kinds=["approval.requested", "approval.decided",
                                              "turn.resumed"])))
    assert counting.read == requested and counting.direct_reads == 0
    assert summary(pending, ["approved"]) == EXPECTED[:2]

