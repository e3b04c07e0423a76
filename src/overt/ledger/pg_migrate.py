"""A PostgreSQL ledger's schema: brought up to date, or checked to be (read-only)."""

from __future__ import annotations

import contextlib
from typing import Any

from overt.errors import LedgerError, MigrationError
from overt.ledger.pg_url import safe_url
from overt.ledger.schema import MIGRATIONS_TABLE, apply_pending, refuse_newer
from overt.ledger.schema.postgres import MIGRATIONS

try:
    import psycopg
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

MIGRATE_LOCK = 0x6F76657275


def migrate(conninfo: str, schema: str, url: str, *, create: bool = True) -> list[int]:
    """Apply pending migrations (idempotent; safe when processes start at once); the
    versions applied. ``create=False``: only to a ledger that is there
    (:func:`refuse_absent`).

    Raises:
        MigrationError: a migration failed; nothing of it was applied.
        LedgerError: ``create`` false, and there is no ledger: nothing was created.
    """
    applied: list[int] = []
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            if _up_to_date(conn, schema, url):
                return applied
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
            try:
                if not create:
                    refuse_absent(conn, schema, url)
                # DDL only when something is missing: the writer role (no CREATE)
                # opens a ledger that is up to date
                if not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                    (schema,)).fetchone():
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                # pg_temp last: a function made SECURITY DEFINER with SET search_path
                # FROM CURRENT (schema.derived) then never reads a caller's temporary
                # table in place of a ledger table
                conn.execute(f'SET search_path = "{schema}", pg_temp')
                known = conn.execute("SELECT to_regclass('overt_migrations')").fetchone()
                fresh = known is None or known[0] is None
                if not fresh:
                    refuse_newer((r[0] for r in conn.execute(
                        "SELECT version FROM overt_migrations")), safe_url(url))
                # a new ledger is created in one transaction: in a schema holding
                # another application's table of the same name, nothing is left
                with conn.transaction() if fresh else contextlib.nullcontext():
                    if fresh:
                        conn.execute(MIGRATIONS_TABLE)
                    applied = _apply(conn)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
    except (psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject) as exc:
        raise MigrationError(
            f"cannot migrate ledger {safe_url(url)}: {exc} (schema {schema} holds "
            "another application's tables; name another with ?schema=NAME)") from exc
    except psycopg.Error as exc:
        raise MigrationError(f"cannot migrate ledger {safe_url(url)}: {exc}") from exc
    return applied


def _up_to_date(conn: Any, schema: str, url: str) -> bool:
    """Every migration recorded already: nothing to do, so no need to wait for the
    lock that other processes' migrations of other ledgers hold (a rows check only;
    what is missing is applied under the lock)."""
    table = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".overt_migrations',)).fetchone()
    if table is None or table[0] is None:
        return False
    versions = [r[0] for r in conn.execute(f'SELECT version FROM "{schema}".overt_migrations')]
    refuse_newer(iter(versions), safe_url(url))
    return {version for version, _, _ in MIGRATIONS} <= set(versions)


def _apply(conn: Any) -> list[int]:
    """Apply each migration not yet applied, each in its own transaction."""
    return apply_pending(conn, MIGRATIONS, ph="%s", transaction=conn.transaction,
                         run=conn.execute)


def refuse_absent(conn: Any, schema: str, url: str) -> None:
    """Refuse a ledger that is not there: no schema ``schema`` (a mistyped
    ``?schema=``), or one that holds no ``overt_migrations`` (every overt ledger has
    one). Reads only.

    Raises:
        LedgerError: which, naming the ledger.
    """
    if not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                        (schema,)).fetchone():
        raise LedgerError(f"no ledger at {safe_url(url)}: there is no schema {schema} "
                          "(opened only if it is there: nothing was created)")
    known = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".overt_migrations',)).fetchone()
    if known is None or known[0] is None:
        raise LedgerError(f"no ledger at {safe_url(url)}: schema {schema} holds no overt "
                          "ledger (opened only if it is there: nothing was created)")


def refuse_stale(conn: Any, url: str) -> None:
    """Refuse to read, read-only, a ledger whose schema is not up to date (``conn``: on
    its schema).

    Raises:
        LedgerError: a migration is not applied (or there is no ledger).
    """
    known = conn.execute("SELECT to_regclass('overt_migrations')").fetchone()
    applied = {r[0] for r in conn.execute("SELECT version FROM overt_migrations")} \
        if known and known[0] is not None else set()
    refuse_newer(applied, safe_url(url))
    missing = [version for version, _, _ in MIGRATIONS if version not in applied]
    if missing:
        raise LedgerError(f"cannot read ledger {safe_url(url)} read-only: its schema lacks "
                          f"migration {missing[0]}; migrate it as its owner "
                          "(overt ledger migrate)")
