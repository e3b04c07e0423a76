"""A PostgreSQL ledger across a server restart (a private cluster, never the shared
server): what was in flight fails as a LedgerError, and what comes after works at
once, on the same ledger object, without reopening it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from overt.events import ChannelReceived
from overt.ledger import open_ledger
from tests import pg_cluster
from tests.conftest import run
from tests.pg_cluster import Cluster


@pytest.fixture
def private_pg() -> Iterator[Cluster]:
    with pg_cluster.private_cluster_or_skip() as made:
        yield made


def received(n: int) -> ChannelReceived:
    return ChannelReceived(session_id="s", claim=f"restart:{n}", source="http",
                           caller_session_id="c", sender="u", channel_ids={}, filtered=None)


def test_a_ledger_idle_across_a_restart_appends_and_reads_at_once(
        private_pg: Cluster) -> None:
    ledger: Any = open_ledger(f"{private_pg.url}?schema=overt&pool_size=3")
    try:
        async def busy() -> None:  # every read connection and the writer's in use once
            import asyncio
            await asyncio.gather(*(ledger.entries() for _ in range(6)))
            await ledger.record([received(0)])
        run(busy())
        private_pg.restart()  # every connection this ledger holds is now dead

        async def after() -> tuple[int, int]:
            await ledger.record([received(1)])
            entries = [len(await ledger.entries()) for _ in range(4)]
            return entries[0], await ledger.count("channel.received")
        assert run(after()) == (2, 2)
        assert ledger.verify_sync().ok
    finally:
        ledger.close_sync()
