"""``open_ledger(url, create=False)`` opens only a ledger that is there: one that is not
(a mistyped path or ``?schema=``) is an error naming it, and nothing is made, on both
backends; a ledger that is there opens as always, and one a migration behind is
brought up to date."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from overt.errors import LedgerError
from overt.events import TurnStarted
from overt.ledger import open_ledger
from overt.ledger.canonical import digest_text
from overt.ledger.schema.sqlite import MIGRATIONS
from tests import backends
from tests.conftest import run

LATEST = [version for version, _, _ in MIGRATIONS]


def _schema(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


def _event(n: int) -> TurnStarted:
    return TurnStarted(turn_id=f"T{n}", session_id="S-1", source="cli",
                       caller_session_id="cli:S-1", message_digest=digest_text(f"m{n}"),
                       model="m", route="default", max_tool_calls=5, actor="operator:default")


@pytest.mark.parametrize("read_only", [False, True])
def test_a_ledger_that_is_not_there_is_an_error_naming_it_and_nothing_is_made(
        backend: str, tmp_path: Path, read_only: bool) -> None:
    url = backends.new_url(backend, tmp_path / "missing", "ledgr")  # a mistyped name
    try:
        with pytest.raises(LedgerError) as raised:
            open_ledger(url, read_only=read_only, create=False)
        if backend == "sqlite":
            assert str(raised.value).startswith(f"no ledger at {url}: no such file")
            assert list(tmp_path.iterdir()) == []  # not the file, not its folder
        else:
            assert str(raised.value).startswith(
                f"no ledger at {url}: there is no schema {_schema(url)} ")
            assert backends.pg_tables(_schema(url)) is None
    finally:
        if backend == "postgres":
            backends.drop(url)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_file_or_schema_holding_no_ledger_is_refused_and_left_as_it_was(
        backend: str, tmp_path: Path, read_only: bool) -> None:
    url = backends.new_url(backend, tmp_path)
    try:
        if backend == "sqlite":
            Path(url).touch()  # an empty file: a ledger would be made in it
        else:
            with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{_schema(url)}"')
        with pytest.raises(LedgerError, match=r"holds no overt ledger"):
            open_ledger(url, read_only=read_only, create=False)
        if backend == "sqlite":
            assert [(p.name, p.stat().st_size) for p in tmp_path.iterdir()] == [
                ("ledger.db", 0)]  # no table written, no -wal or -shm beside it
        else:
            assert backends.pg_tables(_schema(url)) == []
    finally:
        if backend == "postgres":
            backends.drop(url)


def test_a_folder_named_as_a_sqlite_ledger_is_said_to_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match=f"no ledger at {tmp_path}: a folder, not a file"):
        open_ledger(str(tmp_path), create=False)
    assert list(tmp_path.iterdir()) == []


def test_a_memory_ledger_is_never_there_to_open() -> None:
    with pytest.raises(LedgerError, match="each open makes a new, empty one"):
        open_ledger(":memory:", create=False)


def test_a_ledger_that_is_there_opens_reads_and_writes_as_always(ledger: Any,
                                                                ledger_url: str) -> None:
    run(ledger.record([_event(0)], {digest_text("m0"): "m0"}))
    for read_only, turns in ((False, ["T0"]), (True, ["T0", "T1"])):
        opened: Any = open_ledger(ledger_url, read_only=read_only, create=False)
        try:
            assert [e.turn_id for e in run(opened.entries())] == turns
            assert opened.schema_versions() == LATEST
            if not read_only:
                run(opened.record([_event(1)], {digest_text("m1"): "m1"}))
        finally:
            opened.close_sync()
    assert run(ledger.count("turn.started")) == 2 and run(ledger.verify()).ok


def test_a_ledger_a_migration_behind_is_there_and_brought_up_to_date(
        ledger: Any, ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger at the baseline, opened by an overt that has one migration more: read
    only, it is refused; opened writable, the migration is applied and recorded."""
    from overt.ledger import pg_migrate, schema, sqlite

    run(ledger.record([_event(0)], {digest_text("m0"): "m0"}))
    later = (2, "a later migration", "CREATE TABLE overt_later (x INTEGER)")
    monkeypatch.setitem(schema.NAMES, 2, later[1])
    for module in (sqlite, pg_migrate):
        monkeypatch.setattr(module, "MIGRATIONS", [*module.MIGRATIONS, later])
    with pytest.raises(LedgerError, match="lacks migration 2"):  # read-only: nothing run
        open_ledger(ledger_url, read_only=True, create=False)
    current: Any = open_ledger(ledger_url, create=False)
    try:
        assert current.schema_versions() == [*LATEST, 2]
        assert [e.turn_id for e in run(current.entries())] == ["T0"]
        assert run(current.select("SELECT count(*) FROM overt_later", ()))[0][0] == 0
    finally:
        current.close_sync()
