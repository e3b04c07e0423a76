"""The ledger's typed reads for other packages, on both backends: what each answers,
and a clear error for a ledger they cannot query."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from overt.errors import UsageError
from overt.events import TurnCompleted, TurnStarted
from overt.ledger import reads
from overt.ledger.canonical import digest_text


def _started(turn: str, session: str | None) -> TurnStarted:
    return TurnStarted(turn_id=turn, session_id=session, source="cli",
                       caller_session_id="cli:s", model="scripted", route="default",
                       max_tool_calls=5, actor="operator:default", message_digest=digest_text(turn))


def _ended(turn: str, session: str | None, status: str = "completed") -> TurnCompleted:
    failed = status != "completed"
    return TurnCompleted(turn_id=turn, session_id=session, status=status,  # type: ignore[arg-type]
                         reply_digest=None, tools_used=[], tool_calls=0, model_calls=1,
                         input_tokens=1, output_tokens=1, cost_usd=0.0, duration_ms=1.0,
                         error_type="RuntimeError" if failed else None,
                         error_kind="model_error" if failed else None)


def test_count_in_sessions_counts_only_those_sessions_since_a_time(ledger: Any) -> None:
    ledger.record_sync([_started("a1", "a"), _started("a2", "a"), _started("b1", "b"),
                        _started("c1", "c"), _started("x", None)])
    ids = [f"s{n}" for n in range(1200)] + ["a", "b"]  # more than one IN (...) chunk

    async def counts() -> tuple[int, int, int, int]:
        return (await reads.count_in_sessions(ledger, "turn.started", ["a"]),
                await reads.count_in_sessions(ledger, "turn.started", ids),
                await reads.count_in_sessions(ledger, "turn.completed", ["a", "b"]),
                await reads.count_in_sessions(ledger, "turn.started", ["a"],
                                              since="9999-01-01T00:00:00Z"))

    assert asyncio.run(counts()) == (2, 3, 0, 0)


def test_newest_failure_in_sees_those_sessions_and_entries_outside_any(ledger: Any) -> None:
    ledger.record_sync([_ended("a1", "a", "model_error")])
    ledger.record_sync([_ended("a2", "a")])
    ledger.record_sync([_ended("b1", "b", "model_error")])

    async def newest(ids: list[str]) -> str | None:
        found = await reads.newest_failure_in(ledger, ids)
        return None if found is None else found.turn_id

    assert asyncio.run(newest(["a"])) == "a1"
    assert asyncio.run(newest(["a", "b"])) == "b1"
    assert asyncio.run(newest(["c"])) is None
    ledger.record_sync([_ended("x", None, "model_error")])
    assert asyncio.run(newest(["c"])) == "x"  # outside any session: every asker's


class _OtherBackend:
    """Reads plain SQL, but of a backend whose dialect the reads do not know."""

    backend = "other"

    async def select(self, statement: str, params: Any = ()) -> list[Any]:
        raise AssertionError("never asked")


@pytest.mark.parametrize("ledger_like", [object(), _OtherBackend()], ids=["no reads", "other"])
def test_a_ledger_the_reads_cannot_query_is_a_usage_error(ledger_like: object) -> None:
    with pytest.raises(UsageError, match="offers no reads"):
        asyncio.run(reads.count_in_sessions(ledger_like, "turn.started", ["a"]))
    with pytest.raises(UsageError, match="offers no reads"):
        asyncio.run(reads.newest_failure_in(ledger_like, ["a"]))
