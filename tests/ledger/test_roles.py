"""Least privilege on PostgreSQL: the writer role `overt serve` connects as can only
append and read; only the owner's SECURITY DEFINER function prunes, and only
through a sealed prune record. (SQLite has no roles: its side of the matrix is the
prune gate's removal, tests/ledger/test_tamper.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.cli.main import main
from overt.clock import now_iso
from overt.errors import LedgerError, UsageError
from overt.events import TurnCompleted, TurnStarted
from overt.ids import new_ulid
from overt.ledger import open_ledger
from overt.ledger.canonical import digest_text
from overt.ledger.roles import setup_roles
from tests import backends
from tests.conftest import run

pytestmark = pytest.mark.skipif(not backends.pg_available(), reason="no PostgreSQL")


def _turn(name: str) -> tuple[list[Any], dict[str, str]]:
    body = f"body of {name}"
    return [TurnStarted(turn_id=name, session_id="S", source="cli", caller_session_id="cli:S",
                        message_digest=digest_text(body), model="m", route="default",
                        max_tool_calls=5),
            TurnCompleted(turn_id=name, session_id="S", status="completed", reply_digest=None,
                          tools_used=[], tool_calls=0, model_calls=1, input_tokens=0,
                          output_tokens=0, cost_usd=0.0, duration_ms=1.0),
            ], {digest_text(body): body}


def _as(url: str, role: str) -> str:
    return url.replace("postgresql://", f"postgresql://{role}@", 1)


@pytest.fixture
def roles(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(ledger URL, owner, writer): a migrated ledger with one turn, its roles set up."""
    url = backends.new_url("postgres", tmp_path)
    suffix = new_ulid().lower()[-10:]
    owner, writer = f"overt_owner_{suffix}", f"overt_writer_{suffix}"
    ledger = open_ledger(url)
    run(ledger.record(*_turn("old")))
    ledger.close_sync()  # type: ignore[attr-defined]
    try:
        assert main(["--db", url, "ledger", "setup-roles", "--owner", owner,
                     "--writer", writer]) == 0
        yield url, owner, writer
    finally:
        backends.drop(url)
        import psycopg

        with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
            for role in (writer, owner):
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    conn.execute(f'DROP OWNED BY "{role}"')
                    conn.execute(f'DROP ROLE "{role}"')


def _writer_sql(url: str, writer: str, statement: str) -> None:
    import psycopg

    from overt.ledger.pg_url import parse_url

    conninfo, schema = parse_url(_as(url, writer))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute(statement)


@pytest.mark.parametrize("statement", [
    "UPDATE audit_log SET data = data",
    "DELETE FROM audit_log",
    "DELETE FROM content_blobs",
    "TRUNCATE audit_log",
    "TRUNCATE content_blobs CASCADE",
    "UPDATE overt_migrations SET name = 'x'",
    "SELECT overt_prune(1000000)",
    "SELECT set_config('overt.prune_through', '1000000', false); DELETE FROM audit_log",
    "DROP TRIGGER audit_log_append_only ON audit_log",
    "ALTER TABLE audit_log DISABLE TRIGGER ALL",
])
def test_the_writer_cannot_change_delete_truncate_or_fake_a_prune(
    roles: tuple[str, str, str], statement: str
) -> None:
    import psycopg

    url, _owner, writer = roles
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _writer_sql(url, writer, statement)
    assert run(open_ledger(url).verify()).entries == 2


def test_the_writer_appends_and_reads_and_the_ledger_verifies(
    roles: tuple[str, str, str]
) -> None:
    url, _owner, writer = roles
    ledger = open_ledger(_as(url, writer))
    run(ledger.record(*_turn("new")))
    assert [e.turn_id for e in run(ledger.entries(kinds=["turn.started"]))] == ["old", "new"]
    assert run(ledger.verify()).ok
    with pytest.raises(LedgerError):
        run(ledger.prune(now_iso()))  # the writer may not execute overt_prune
    ledger.close_sync()  # type: ignore[attr-defined]


def test_the_owner_prunes_through_the_sealed_record_and_verify_passes(
    roles: tuple[str, str, str]
) -> None:
    url, owner, writer = roles
    cutoff = now_iso()
    writer_ledger = open_ledger(_as(url, writer))
    run(writer_ledger.record(*_turn("new")))
    writer_ledger.close_sync()  # type: ignore[attr-defined]
    ledger = open_ledger(_as(url, owner))
    record = run(ledger.prune(cutoff))
    assert record.removed_entries == 2 and record.through_seq == 2
    report = run(ledger.verify())
    assert report.ok and report.first_seq == 3
    ledger.close_sync()  # type: ignore[attr-defined]


def test_the_owner_cannot_prune_without_a_sealed_record_at_the_head(
    roles: tuple[str, str, str]
) -> None:
    import psycopg

    url, owner, _writer = roles
    from overt.ledger.pg_url import parse_url

    conninfo, schema = parse_url(_as(url, owner))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="no sealed prune"):
            conn.execute("SELECT overt_prune(2)")
    assert run(open_ledger(url).verify()).entries == 2


def test_setup_roles_refuses_bad_names_and_sqlite(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        setup_roles(backends.PG_BASE, "a", "a")
    with pytest.raises(UsageError):
        setup_roles(backends.PG_BASE, "Robert'); DROP", "w")
    with pytest.raises(UsageError):
        setup_roles(str(tmp_path / "l.db"), "o", "w")
