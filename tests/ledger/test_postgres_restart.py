"""A PostgreSQL ledger across a server restart (a private cluster, never the shared
server): what was in flight fails as a LedgerError, and what comes after works at
once, on the same ledger object, without reopening it."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from overt.errors import LedgerError, LedgerUnavailable
from overt.events import ChannelReceived
from overt.ledger import open_ledger
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from tests.conftest import ALLOW_ALL, cli_message, run
from tests.pg_cluster import Cluster


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


def test_reads_are_served_once_the_server_is_back_after_an_outage_they_waited_through(
        private_pg: Cluster) -> None:
    """The pool's reconnection attempts back off while the server is down (1, 2, 4, 8 s
    ...); a read that comes after the server is back must not wait out that backoff."""
    ledger: Any = open_ledger(f"{private_pg.url}?schema=overt&pool_size=2")
    ledger.read_wait_s = 4.0  # how long a read waits for a connection (30 s by default)
    try:
        run(ledger.record([received(0)]))
        assert run(ledger.count("channel.received")) == 1
        private_pg.pg_ctl("stop", "-m", "fast")
        try:  # reads while it is down fail, and set the pool retrying
            for _ in range(2):
                with pytest.raises(LedgerError):
                    run(ledger.count("channel.received"))
            time.sleep(10)  # long enough for the retries to back off to 16 s apart
        finally:
            private_pg.pg_ctl("start")
        assert run(ledger.count("channel.received")) == 1
        run(ledger.record([received(1)]))
        assert run(ledger.count("channel.received")) == 2
    finally:
        ledger.close_sync()


def test_an_outage_is_logged_in_proportion_and_every_failure_is_counted(
        private_pg: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """Down, every append, read and connection attempt fails; the log holds the first
    failure, then the end of the outage with how many failed, not a line (two, with
    libpq's message) for each; a turn it stops is logged at INFO, its caller told."""
    ledger: Any = open_ledger(f"{private_pg.url}?schema=overt&pool_size=2")
    ledger.read_wait_s = 2.0
    runtime = Runtime(model=ScriptedModel(["ok"] * 5), ledger=ledger, gate=ALLOW_ALL)
    caplog.set_level(logging.INFO)
    try:
        run(ledger.record([received(0)]))
        run(runtime.start())  # its runtime.started is on the record
        private_pg.pg_ctl("stop", "-m", "fast")
        try:
            for n in range(1, 11):
                with pytest.raises(LedgerUnavailable, match="cannot append to ledger"):
                    run(ledger.record([received(n)]))
            for _ in range(2):
                with pytest.raises(LedgerUnavailable, match="cannot read ledger"):
                    run(ledger.count("channel.received"))
            result = run(runtime.respond(cli_message("hi"), history=()))
            assert result.error is not None and result.error.kind == "ledger_error"
            assert result.error.type == "LedgerUnavailable"
        finally:
            private_pg.pg_ctl("start")
        run(ledger.record([received(11)]))
        assert run(ledger.count("channel.received")) == 2
    finally:
        ledger.close_sync()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    outage = [m for m in warnings if "out of reach" in m or "answers again" in m]
    assert len(outage) == 2, warnings
    assert "the server is out of reach: append failed: connection failed" in outage[0]
    assert "\n" not in outage[0]
    assert "the server answers again after" in outage[1]
    assert "11 appends" in outage[1] and "2 reads" in outage[1]  # the turn's one append too
    assert not [r for r in caplog.records if r.name == "psycopg.pool"
                and "error connecting" in r.getMessage()]
    # each failure one by one, at INFO: the stopped turn
    assert [r.levelno for r in caplog.records if "stopped: the ledger failed" in r.getMessage()
            ] == [logging.INFO]
    assert len(warnings) <= 6, warnings  # the two above; a lost connection, once each
