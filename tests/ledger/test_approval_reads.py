"""The reads that approvals and the delivery of resumed replies make: each through an
index of what it concerns, not through every entry of its kinds."""

from __future__ import annotations

from overt.events import ChannelReplied, Event, ToolCallCompleted, ToolCallStarted
from overt.ledger.base import Ledger
from overt.ledger.sql import POSTGRES, SQLITE, Dialect, direct_calls, unresumed_replies
from tests.backends import Raw
from tests.conftest import run


def started(call_id: str, turn_id: str | None = None) -> ToolCallStarted:
    return ToolCallStarted(turn_id=turn_id, session_id="s1", tool_call_id=call_id,
                           tool_name="pay", triggered_by="cli", caller_session_id="s1",
                           args_sha256="sha256:0")


def completed(call_id: str, turn_id: str | None = None) -> ToolCallCompleted:
    return ToolCallCompleted(turn_id=turn_id, session_id="s1", tool_call_id=call_id,
                             tool_name="pay", triggered_by="cli", caller_session_id="s1",
                             tool_status="ok", tool_duration_ms=1.0, exc_type=None,
                             args_sha256="sha256:0", result_digest=None)


def replied(claim: str, *, awaiting: str | None = None, resumed_from: str | None = None,
            source: str = "slack_dm") -> ChannelReplied:
    return ChannelReplied(turn_id=f"t-{claim}", session_id="s1", claim=claim, source=source,
                          target={"channel": "D1"}, reply_ids={"ts": "1"},
                          awaiting_approval=awaiting, resumed_from=resumed_from)


def plan(raw: Raw, statement: str, dialect: Dialect, value: str) -> str:
    statement = statement.replace(dialect.ph, f"'{value}'")
    if raw.pg:
        raw.execute("ANALYZE audit_log")  # as autovacuum does: the indexes' statistics
        raw.execute("SET enable_seqscan = off")  # a table this small is read whole otherwise
        return " ".join(r[0] for r in raw.query(f"EXPLAIN {statement}"))
    return " ".join(r[3] for r in raw.query(f"EXPLAIN QUERY PLAN {statement}"))


def test_direct_calls_are_the_records_of_those_calls_made_outside_any_turn(
        ledger: Ledger, raw: Raw) -> None:
    async def main() -> None:
        events: list[Event] = []
        for n in range(20):
            events += [started(f"call_{n}"), completed(f"call_{n}")]
            events += [started(f"call_t{n}", f"t{n}"), completed(f"call_t{n}", f"t{n}")]
        await ledger.record(events)
        await ledger.record([started("call_3"), completed("call_3")])  # run again
        got = await ledger.direct_calls(["call_3", "call_7", "call_t3", "call_none"])
        assert [(e.kind, e.event().tool_call_id)
                for e in got] == [
            ("tool_call.started", "call_3"), ("tool_call.completed", "call_3"),
            ("tool_call.started", "call_7"), ("tool_call.completed", "call_7"),
            ("tool_call.started", "call_3"), ("tool_call.completed", "call_3")]
        assert [e.seq for e in got] == sorted(e.seq for e in got)
        assert await ledger.direct_calls([]) == []
        many = await ledger.direct_calls([f"call_{n}" for n in range(20)] * 60)  # chunked
        assert len(many) == 42
    run(main())
    dialect = POSTGRES if raw.pg else SQLITE
    assert "audit_log_direct_calls" in plan(raw, direct_calls(dialect, 2), dialect, "call_3")


def test_unresumed_replies_are_the_paused_replies_whose_resumed_reply_is_not_recorded(
        ledger: Ledger, raw: Raw) -> None:
    async def main() -> None:
        await ledger.record([replied(f"slack:Ev{n}") for n in range(30)])
        await ledger.record([replied("slack:EvA", awaiting="R1"),
                             replied("slack:EvB", awaiting="R2"),
                             replied("email:<m1>", awaiting="R3", source="email"),
                             replied("slack:EvC", awaiting="R4")])
        await ledger.record([replied("slack:EvA:resumed:R1", resumed_from="R1"),
                             replied("slack:EvC:resumed:R9", resumed_from="R9")])
        owed = await ledger.unresumed_replies()
        assert [(r.claim, r.awaiting_approval)
                for r in (e.event(ChannelReplied) for e in owed)] == [
            ("slack:EvB", "R2"), ("email:<m1>", "R3"), ("slack:EvC", "R4")]
        await ledger.record([replied("slack:EvB:resumed:R2", resumed_from="R2")])
        assert [e.event(ChannelReplied).claim for e in await ledger.unresumed_replies()] == [
            "email:<m1>", "slack:EvC"]
    run(main())
    dialect = POSTGRES if raw.pg else SQLITE
    read = plan(raw, unresumed_replies(dialect), dialect, "")
    assert "audit_log_paused_replies" in read and "audit_log_claims" in read, read
