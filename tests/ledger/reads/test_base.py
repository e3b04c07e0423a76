"""Which ledgers the typed reads can query, and the clear refusal of any other."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from overt.errors import UsageError
from overt.ledger.reads import memory, readable, replay, sessions, threads, turns, web
from overt.ledger.reads.conversations import conversation


class _OtherBackend:
    backend = "other"

    async def select(self, statement: str, params: Any = ()) -> list[Any]:
        raise AssertionError("never asked")


def test_both_built_in_ledgers_are_readable_and_nothing_else(ledger: Any) -> None:
    assert readable(ledger)
    assert not readable(object()) and not readable(_OtherBackend())


@pytest.mark.parametrize("read", [
    lambda x: web.size(x), lambda x: web.entry_at(x, 1), lambda x: conversation(x, "s"),
    lambda x: sessions.session_summary(x, "s"), lambda x: memory.node(x, "n"),
    lambda x: replay.turns_entries(x, ["t"]),
    lambda x: turns.turn_records(x, order="newest", after=None),
    lambda x: threads.email_reply_session(x, "<m@x>"),
], ids=["web", "entry", "conversation", "session", "memory", "replay", "turns", "threads"])
@pytest.mark.parametrize("ledger_like", [object(), _OtherBackend()], ids=["no reads", "other"])
def test_a_ledger_the_reads_cannot_query_is_refused_clearly(read: Any,
                                                            ledger_like: object) -> None:
    with pytest.raises(UsageError, match="offers no reads of its tables"):
        asyncio.run(read(ledger_like))
