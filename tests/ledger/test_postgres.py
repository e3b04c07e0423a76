"""What only the PostgreSQL backend does."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

from overt.errors import UsageError
from overt.ledger import open_ledger
from overt.ledger.pg_url import DEFAULT_POOL_SIZE, parse_url, url_pool_size
from overt.ledger.pg_url import safe_url as _safe
from tests.conftest import run


def test_the_schema_parameter_is_overts_and_is_not_passed_to_libpq() -> None:
    assert parse_url("postgresql://h:5432/db?schema=audit&sslmode=disable") == (
        "postgresql://h:5432/db?sslmode=disable", "audit")
    assert parse_url("postgresql://h/db") == ("postgresql://h/db", "public")


def test_libpq_parameters_reach_libpq_as_given_spaces_included() -> None:
    url = "postgresql://h/db?schema=audit&options=-c%20statement_timeout%3D5s&sslmode=disable"
    assert parse_url(url)[0] == (
        "postgresql://h/db?options=-c%20statement_timeout%3D5s&sslmode=disable")


def test_the_pool_size_parameter_is_overts_and_sizes_the_read_pool() -> None:
    url = "postgresql://h/db?pool_size=12&schema=audit&sslmode=disable"
    assert parse_url(url) == ("postgresql://h/db?sslmode=disable", "audit")
    assert url_pool_size(url) == 12
    assert url_pool_size("postgresql://h/db") == DEFAULT_POOL_SIZE


@pytest.mark.parametrize("size", ["0", "-1", "many", "1001", ""])
def test_a_pool_size_that_is_not_a_whole_number_in_range_is_refused(size: str) -> None:
    with pytest.raises(UsageError, match="invalid ledger pool_size"):
        url_pool_size(f"postgresql://h/db?pool_size={size}")


def test_a_schema_name_that_is_not_a_plain_identifier_is_refused() -> None:
    with pytest.raises(UsageError, match="invalid ledger schema"):
        parse_url('postgresql://h/db?schema=x";drop')


def test_passwords_never_appear_in_messages() -> None:
    assert _safe("postgresql://u:hunter2@h/db") == "postgresql://u:***@h/db"


def test_an_unreachable_server_is_a_clear_ledger_error_without_the_password() -> None:
    from overt.errors import LedgerError
    from overt.ledger import open_ledger

    with pytest.raises(LedgerError, match="Connection refused") as excinfo:
        open_ledger("postgresql://u:hunter2@127.0.0.1:1/x")
    assert "hunter2" not in str(excinfo.value) and "u:***@" in str(excinfo.value)


def test_a_ledger_opened_with_a_pool_size_reads_on_at_most_that_many_connections(
        pg_url: str) -> None:
    """Six slow reads at once on a ledger of ``pool_size=2``: the server sees two of
    its connections reading at most (counted in ``pg_stat_activity``), and every
    read is answered."""
    import psycopg

    from tests import backends

    name = f"overt-pool-{uuid.uuid4().hex[:12]}"
    ledger: Any = open_ledger(f"{pg_url}&pool_size=2&application_name={name}")
    seen: list[int] = []
    done = threading.Event()

    def count() -> None:
        with psycopg.connect(backends.PG_BASE, autocommit=True) as watch:
            while not done.is_set():
                seen.append(watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    (name,)).fetchone()[0])
                time.sleep(0.02)

    async def reads() -> list[Any]:
        return await asyncio.gather(*[ledger.select("SELECT pg_sleep(0.3)")
                                      for _ in range(6)])

    watcher = threading.Thread(target=count)
    watcher.start()
    try:
        assert len(run(reads())) == 6
    finally:
        done.set()
        watcher.join()
        ledger.close_sync()
    assert max(seen) == 2, seen  # the writer's connection opens with the first append


def test_a_statement_the_server_cancels_is_a_ledger_error_not_an_outage(
        pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """``statement_timeout`` (here: a read waiting on a lock another session holds) is
    the server answering: a clear error that says so, not "out of reach"."""
    import psycopg

    from overt.errors import LedgerError, LedgerUnavailable
    from overt.ledger.pg_url import parse_url
    url = pg_url
    open_ledger(url).close_sync()  # type: ignore[attr-defined]
    ledger: Any = open_ledger(f"{url}&options=-c%20statement_timeout%3D300")
    conninfo, schema = parse_url(url)
    try:
        with psycopg.connect(conninfo) as holder:
            # the lock goes after 5 s at most, whatever the ledger does (a ledger that
            # never sent the timeout would wait that out, and then read)
            holder.execute("SET idle_in_transaction_session_timeout = '5s'")
            holder.execute(f'LOCK TABLE "{schema}".audit_log IN ACCESS EXCLUSIVE MODE')
            with pytest.raises(LedgerError, match="cancelled the statement") as read:
                run(ledger.entries())
            with pytest.raises(LedgerError, match="cancelled the statement") as append:
                run(ledger.record([_event()]))
        for raised in (read.value, append.value):
            assert not isinstance(raised, LedgerUnavailable), raised
        assert not ledger.outage.ongoing
        assert "out of reach" not in caplog.text
        # the lock gone (the holder's connection closed), the same ledger goes on
        run(ledger.record([_event()]))
        assert [e.kind for e in run(ledger.entries())] == ["turn.started"]
    finally:
        ledger.close_sync()


def _event() -> Any:
    from overt.events import TurnStarted

    return TurnStarted(turn_id="T1", session_id="S-1", source="cli", caller_session_id="cli:S-1",
                       message_digest="0" * 64, model="m", route="default", max_tool_calls=5,
                       actor="operator:default")
