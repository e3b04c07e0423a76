"""Numbered migrations of the SQLite ledger.

Each migration runs once, in its own transaction, recorded in
``overt_migrations``; running them again is a no-op. Append-only is enforced
by triggers: an ``UPDATE`` or ``DELETE`` on any ledger table is aborted by the
database itself, whatever code issues it. The one exception is a prune: inside
its transaction (:func:`pruning`) it drops the delete guards of the tables it
prunes, deletes through the sealed seq and creates the guards again before
committing: no row in any table switches a guard off (migration 10 removed the
``overt_prune_gate`` table a single INSERT could open), only DDL inside the
prune's own transaction does, and a transaction that fails takes its DDL back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from overt.errors import LedgerError
from overt.ledger import schema
from overt.ledger.chain import entry_data
from overt.ledger.schema import NAMES, memory, memory_search, memory_trigrams, provenance
from overt.ledger.sql import (
    CONTENT_KEY_SHIFT,
    SQLITE,
    insert_trail_index,
    trail_index_fill,
)
from overt.ledger.trail_index import KEY, index_row, table_sql

APPEND_ONLY = "overt ledger is append-only"


def _no_update(table: str) -> str:
    return (f"CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE on {table}'); END;\n")


def _no_delete(table: str, *, gated: bool) -> str:
    when = (" WHEN OLD.seq > coalesce((SELECT max(through_seq) FROM overt_prune_gate), 0)"
            if gated else "")
    return (f"CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}{when} "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: DELETE on {table}'); END;\n")


def _append_only(table: str) -> str:
    """Both guards of a table no prune reaches (the migrations, memory)."""
    return _no_update(table) + _no_delete(table, gated=False)


MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS overt_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
);
""" + _append_only("overt_migrations")

_INITIAL = schema.chain_table(SQLITE) + """
-- The content tier. seq is the first entry of the transaction that stored the
-- body, so pruning the chain through N removes exactly the content of 1..N.
-- Keyed by (seq, digest), not by digest: rows arrive in seq order, so a commit
-- dirties one page at the end of one b-tree instead of a random page per body.
-- A lookup starts from the seq of the entry that references the body.
CREATE TABLE content_blobs (
    seq        INTEGER NOT NULL,
    digest     TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (seq, digest)
) WITHOUT ROWID;

CREATE TABLE overt_prune_gate (through_seq INTEGER NOT NULL);
""" + _no_update("audit_log") + _no_delete("audit_log", gated=True) \
    + _no_update("content_blobs") + _no_delete("content_blobs", gated=True) \
    + _no_update("overt_prune_gate") + "\n" + schema.views(SQLITE)

# The content tier as a rowid table keyed seq << 20 | n (see sql.CONTENT_KEY_SHIFT):
# each commit appends to one leaf. Bodies already there keep their seq.
_CONTENT_KEYED_V9 = f"""
CREATE TABLE content_blobs_keyed (
    key        INTEGER PRIMARY KEY,
    seq        INTEGER NOT NULL,
    digest     TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
INSERT INTO content_blobs_keyed (key, seq, digest, body, created_at)
    SELECT (seq << {CONTENT_KEY_SHIFT}) + row_number() OVER (PARTITION BY seq ORDER BY digest)
           - 1, seq, digest, body, created_at
    FROM content_blobs ORDER BY seq, digest;
DROP TRIGGER content_blobs_no_update;
DROP TRIGGER content_blobs_no_delete;
DROP TABLE content_blobs;
ALTER TABLE content_blobs_keyed RENAME TO content_blobs;
""" + _no_update("content_blobs") + _no_delete("content_blobs", gated=True)

PRUNED_TABLES = ("content_blobs", "trail_index", "audit_log")
"""The tables a prune deletes from, in the order it deletes."""

# Migration 10 (11 in SQLite's numbering before both backends shared one): no row
# switches a delete guard off; the guards of the trail index come with its table (11).
_NO_GATE_V10 = "".join(f"DROP TRIGGER IF EXISTS {t}_no_delete;\n" for t in PRUNED_TABLES) + """
DROP TRIGGER IF EXISTS overt_prune_gate_no_update;
DROP TABLE IF EXISTS overt_prune_gate;
""" + _no_delete("content_blobs", gated=False) + _no_delete("audit_log", gated=False)

# The trail index (see overt.ledger.trail_index) in plain columns, filled from the
# chain by FILLS[11]; it replaces the table of marshalled records SQLite kept before.
_TRAIL_INDEX_V11 = ("DROP TABLE IF EXISTS trail_index;\n" + table_sql(postgres=False)
                    + _append_only("trail_index"))


def fill_trail_index(conn: sqlite3.Connection) -> None:
    """Index the trail entries already in the chain (migration 11)."""
    cursor = conn.execute(trail_index_fill(SQLITE))
    while rows := cursor.fetchmany(10_000):
        conn.executemany(insert_trail_index(SQLITE), [
            index_row(seq, kind, at, turn_id, session_id, entry_data(data, seq), body_seq)
            for seq, kind, at, turn_id, session_id, data, body_seq in rows])


def lift_delete_guards(conn: sqlite3.Connection) -> None:
    """Drop the delete guards of :data:`PRUNED_TABLES`; only a prune does this, inside
    the transaction that deletes and then calls :func:`restore_delete_guards`."""
    for table in PRUNED_TABLES:
        conn.execute(f"DROP TRIGGER {table}_no_delete")


def restore_delete_guards(conn: sqlite3.Connection) -> None:
    """Create the delete guards :func:`lift_delete_guards` dropped, as they were."""
    for table in PRUNED_TABLES:
        conn.execute(_no_delete(table, gated=False))


def refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """Close ``conn`` and refuse a database holding tables but no ``overt_migrations``
    (every overt ledger has had one since the first): another application's file,
    which overt must not write into, not even WAL mode (that rewrites its header). A
    new or empty file and an overt ledger pass.

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


# The Merkle tree's stored subtrees (see overt.ledger.tree): written when a checkpoint
# is made and when a prune removes leaves, never on a turn's path; never pruned.
_MERKLE_NODES_V12 = schema.merkle_table(SQLITE) + _append_only("merkle_nodes")

# The trail index keyed by (session_id, kind, seq) (see overt.ledger.trail_index.KEY):
# a table WITHOUT ROWID is its key's order, so it is rebuilt, with its guards.
_TRAIL_BY_KIND_V14 = (table_sql(postgres=False, name="trail_index_by_kind", key=KEY)
                      + "INSERT INTO trail_index_by_kind SELECT * FROM trail_index;\n"
                      "DROP TRIGGER trail_index_no_update;\n"
                      "DROP TRIGGER trail_index_no_delete;\n"
                      "DROP TABLE trail_index;\n"
                      "ALTER TABLE trail_index_by_kind RENAME TO trail_index;\n"
                      + _append_only("trail_index"))

MIGRATIONS: list[tuple[int, str, str]] = [
    (version, NAMES[version], script) for version, script in sorted({
        **schema.same_on_both(SQLITE),
        1: _INITIAL,
        5: memory.sqlite(_append_only),
        7: memory_search.sqlite(_append_only),
        8: memory_search.sqlite_v8(),
        9: _CONTENT_KEYED_V9,
        10: _NO_GATE_V10,
        11: _TRAIL_INDEX_V11,
        12: _MERKLE_NODES_V12,
        13: memory_search.sqlite_prefix(),
        14: _TRAIL_BY_KIND_V14,
        17: "SELECT 1",  # PostgreSQL's roles; whoever may write a SQLite file may do anything
        18: memory_trigrams.sqlite(),
        19: provenance.sqlite(_no_update),
    }.items())]

FILLS: dict[int, Callable[[sqlite3.Connection], None]] = {11: fill_trail_index}
"""Python steps of a migration, run after its SQL in the same transaction."""
