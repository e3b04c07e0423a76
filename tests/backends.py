"""Both ledger backends for tests: URLs, and raw access for tampering as an attacker would."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from overt.ids import new_ulid

BACKENDS = ("sqlite", "postgres")
PG_BASE = os.environ.get("OVERT_TEST_PG", "postgresql://127.0.0.1:5432/test")


_reachable: list[bool] = []


def pg_available() -> bool:
    """Whether the test server at :data:`PG_BASE` answers (asked once per process)."""
    if not _reachable:
        try:
            with psycopg.connect(PG_BASE, connect_timeout=3):
                _reachable.append(True)
        except psycopg.Error:
            _reachable.append(False)
    return _reachable[0]


def require_pg() -> None:
    """Skip the calling test when no PostgreSQL answers at :data:`PG_BASE`, saying so;
    in CI (env ``CI`` set), where one must, fail it instead."""
    if pg_available():
        return
    from tests import needs

    needs.missing(f"PostgreSQL is not reachable at {PG_BASE}")


def new_url(backend: str, tmp_path: Path, name: str = "ledger") -> str:
    if backend == "sqlite":
        return str(tmp_path / f"{name}.db")
    return f"{PG_BASE}?schema=overt_test_{new_ulid().lower()}"


def pg_tables(schema: str) -> list[str] | None:
    """The tables of a PostgreSQL schema; ``None`` when there is no such schema."""
    with psycopg.connect(PG_BASE) as conn:
        if not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                            (schema,)).fetchall():
            return None
        return sorted(r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,)))


def drop(url: str) -> None:
    """Remove a test ledger's PostgreSQL schema (SQLite files go with tmp_path)."""
    if "schema=" in url:
        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class Raw:
    """Plain SQL on a ledger's database, bypassing overt. SQL uses ``?`` placeholders."""

    def __init__(self, url: str, ledger: Any = None) -> None:
        self.url = url
        self.pg = "schema=" in url
        if self.pg:
            schema = url.rsplit("schema=", 1)[1]
            self.conn: Any = psycopg.connect(PG_BASE, autocommit=True,
                                             options=f"-c search_path={schema}")
        else:
            self.conn = sqlite3.connect(url, isolation_level=None)

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(self._sql(statement), params)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(self._sql(statement), params)

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.pg else statement

    def tables(self) -> list[str]:
        if self.pg:
            rows = self.query("SELECT table_name FROM information_schema.tables "
                              "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'")
        else:
            # stored tables, as PostgreSQL's BASE TABLE: a virtual table (the FTS5
            # index) is listed by its shadow tables, which hold its bytes
            rows = self.query("SELECT name FROM sqlite_master WHERE type = 'table' "
                              "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")
        return sorted(r[0] for r in rows)

    def drop_guards(self) -> Raw:
        """Drop the append-only triggers, as someone with database access could."""
        if self.pg:
            for table, trigger in self.query(
                "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c "
                "ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND NOT t.tgisinternal"):
                self.execute(f'DROP TRIGGER "{trigger}" ON "{table}"')
        else:
            for (name,) in self.query("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
                self.execute(f"DROP TRIGGER {name}")
        # Indexes over fields of data refuse a row whose data is not JSON; a tamperer
        # with database access drops them too, and verify must still catch the change.
        self.execute("DROP INDEX IF EXISTS audit_log_claims")
        self.execute("DROP INDEX IF EXISTS audit_log_reasoning_phase")
        self.execute("DROP INDEX IF EXISTS audit_log_steps_at")
        self.execute("DROP INDEX IF EXISTS audit_log_reply_failures")
        self.execute("DROP INDEX IF EXISTS audit_log_direct_calls")
        self.execute("DROP INDEX IF EXISTS audit_log_paused_replies")
        self.execute("DROP INDEX IF EXISTS audit_log_memory")
        return self

    @property
    def append_only_error(self) -> type[Exception]:
        return psycopg.errors.InsufficientPrivilege if self.pg else sqlite3.IntegrityError

    def close(self) -> None:
        self.conn.close()
