"""The SQLite ledger's migrations: the baseline, and any after it.

Each migration runs once, in its own transaction, recorded in
``overt_migrations``; running them again is a no-op. Append-only is enforced
by triggers: an ``UPDATE`` or ``DELETE`` on any ledger table is aborted by the
database itself, whatever code issues it. The one exception is a prune: inside
its transaction (:func:`lift_delete_guards`) it drops the delete guards of the
tables it prunes, deletes through the sealed seq and creates the guards again
before committing. No row in any table switches a guard off, only DDL inside the
prune's own transaction does, and a transaction that fails takes its DDL back.
"""

from __future__ import annotations

import sqlite3

from overt.errors import LedgerError
from overt.ledger import schema
from overt.ledger.schema import NAMES, memory, memory_search, memory_trigrams
from overt.ledger.sql import SQLITE
from overt.ledger.trail_index import table_sql

APPEND_ONLY = "overt ledger is append-only"


def _no_update(table: str) -> str:
    return (f"CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE on {table}'); END;\n")


def _no_delete(table: str) -> str:
    return (f"CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: DELETE on {table}'); END;\n")


def _append_only(table: str) -> str:
    """Both guards of ``table``."""
    return _no_update(table) + _no_delete(table)


MIGRATIONS_TABLE = schema.MIGRATIONS_TABLE + _append_only("overt_migrations")

# The content tier. seq is the entry that names the body, so pruning the chain
# through N removes exactly the content of 1..N. A rowid table keyed seq << 20 | n
# (see sql.CONTENT_KEY_SHIFT): rows arrive in seq order, so a commit appends to one
# page at the end of one b-tree instead of dirtying a random page per body. A
# lookup starts from the seq of the entry that references the body.
_CONTENT = """
CREATE TABLE content_blobs (
    key        INTEGER PRIMARY KEY,
    seq        INTEGER NOT NULL,
    digest     TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""

PRUNED_TABLES = ("content_blobs", "trail_index", "audit_log")
"""The tables a prune deletes from, in the order it deletes."""

BASELINE = (
    schema.chain_table(SQLITE) + _append_only("audit_log")
    + _CONTENT + _append_only("content_blobs")
    + "\n" + schema.views(SQLITE)
    + memory.tables(_append_only)
    + memory_trigrams.sqlite() + memory_search.sqlite(_append_only)
    # the trail index (overt.ledger.trail_index), written by the writer with the
    # entries it indexes
    + table_sql(postgres=False) + _append_only("trail_index")
    + schema.merkle_table(SQLITE) + _append_only("merkle_nodes"))
"""0.1.0's schema, whole (migration 1). Whoever may write a SQLite file may do
anything to it: there are no roles, so nothing of :mod:`.derived` is here."""

MIGRATIONS: list[tuple[int, str, str]] = [(1, NAMES[1], BASELINE)]


def lift_delete_guards(conn: sqlite3.Connection) -> None:
    """Drop the delete guards of :data:`PRUNED_TABLES`; only a prune does this, inside
    the transaction that deletes and then calls :func:`restore_delete_guards`."""
    for table in PRUNED_TABLES:
        conn.execute(f"DROP TRIGGER {table}_no_delete")


def restore_delete_guards(conn: sqlite3.Connection) -> None:
    """Create the delete guards :func:`lift_delete_guards` dropped, as they were."""
    for table in PRUNED_TABLES:
        conn.execute(_no_delete(table))


def refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """Close ``conn`` and refuse a database holding tables but no ``overt_migrations``
    (every overt ledger has one): another application's file, which overt must not
    write into, not even WAL mode (that rewrites its header). A new or empty file and
    an overt ledger pass.

    Raises:
        LedgerError: the file is another application's database.
    """
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]
    if names and "overt_migrations" not in names:
        conn.close()
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise LedgerError(f"cannot open ledger {path}: not an overt ledger (it holds another "
                          f"application's tables: {shown}); name an empty or new file")
