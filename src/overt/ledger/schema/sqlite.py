"""Numbered migrations of the SQLite ledger.

Each migration runs once, in its own transaction, recorded in
``overt_migrations``; running them again is a no-op. Append-only is enforced
by triggers: an ``UPDATE`` or ``DELETE`` on any ledger table is aborted by the
database itself, whatever code issues it. The one exception is a prune: inside
its transaction (:func:`pruning`) it drops the delete guards of the tables it
prunes, deletes through the sealed seq and creates the guards again before
committing: no row in any table switches a guard off (migration 11 removed the
``overt_prune_gate`` table a single INSERT could open), only DDL inside the
prune's own transaction does, and a transaction that fails takes its DDL back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from overt.ledger.schema import memory, memory_search
from overt.ledger.sql import (
    CONTENT_KEY_SHIFT,
    INSERT_TRAIL_INDEX,
    SQLITE,
    TRAIL_INDEX_FILL,
    appending_indexes,
    claims_index,
    failure_condition,
    reasoning_phase_index,
    reasoning_steps_view,
)
from overt.ledger.trail_index import decode, index_row

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

_INITIAL = f"""
CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL,
    kind       TEXT NOT NULL,
    at         TEXT NOT NULL,
    turn_id    TEXT,
    session_id TEXT,
    data       TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX audit_log_turn ON audit_log (turn_id, seq);
CREATE INDEX audit_log_session ON audit_log (session_id, seq);
CREATE INDEX audit_log_kind_at ON audit_log (kind, at);
CREATE INDEX audit_log_failures ON audit_log (seq) WHERE {failure_condition(SQLITE, 1)};

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
    + _no_update("overt_prune_gate") + """
CREATE VIEW turns AS
SELECT s.turn_id, s.session_id, s.at AS started_at,
       json_extract(s.data, '$.source') AS source,
       json_extract(s.data, '$.caller_session_id') AS caller_session_id,
       json_extract(s.data, '$.model') AS model,
       json_extract(s.data, '$.route') AS route,
       c.at AS completed_at,
       json_extract(c.data, '$.status') AS status,
       json_extract(c.data, '$.tools_used') AS tools_used,
       json_extract(c.data, '$.duration_ms') AS duration_ms
FROM audit_log s
LEFT JOIN audit_log c ON c.turn_id = s.turn_id AND c.kind = 'turn.completed'
WHERE s.kind = 'turn.started';

CREATE VIEW inferences AS
SELECT seq, at, turn_id, session_id,
       json_extract(data, '$.inference_id') AS inference_id,
       json_extract(data, '$.model') AS model,
       json_extract(data, '$.route') AS route,
       json_extract(data, '$.input_tokens') AS input_tokens,
       json_extract(data, '$.output_tokens') AS output_tokens,
       json_extract(data, '$.cost_usd') AS cost_usd,
       json_extract(data, '$.duration_ms') AS duration_ms,
       json_extract(data, '$.escalated') AS escalated,
       json_extract(data, '$.error_type') AS error_type
FROM audit_log WHERE kind = 'inference';

CREATE VIEW tool_calls AS
SELECT seq, at, turn_id, session_id,
       json_extract(data, '$.tool_call_id') AS tool_call_id,
       json_extract(data, '$.tool_name') AS tool_name,
       json_extract(data, '$.triggered_by') AS triggered_by,
       json_extract(data, '$.caller_session_id') AS caller_session_id,
       json_extract(data, '$.tool_status') AS tool_status,
       json_extract(data, '$.tool_duration_ms') AS tool_duration_ms,
       json_extract(data, '$.exc_type') AS exc_type,
       json_extract(data, '$.args_sha256') AS args_sha256
FROM audit_log WHERE kind = 'tool_call.completed';
"""

_FAILURES_V2 = f"""
DROP INDEX audit_log_failures;
CREATE INDEX audit_log_failures ON audit_log (seq) WHERE {failure_condition(SQLITE)};
"""

_CLAIMS_V3 = claims_index(SQLITE) + ";\n"

_REASONING_V4 = reasoning_phase_index(SQLITE) + ";\n" + reasoning_steps_view(SQLITE) + ";\n"

# Indexes whose pages a commit appends to, not one page per kind or phase it holds.
_APPENDING_INDEXES_V6 = appending_indexes(SQLITE)

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

# The trail index (see overt.ledger.trail_index): a session's trail records together,
# filled from the chain by FILLS[10].
_TRAIL_INDEX_V10 = """
CREATE TABLE trail_index (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    body_key   INTEGER,
    record     BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
""" + _no_update("trail_index") + _no_delete("trail_index", gated=True)


def _fill_trail_index(conn: sqlite3.Connection) -> None:
    """Index the trail entries already in the chain (migration 10)."""
    cursor = conn.execute(TRAIL_INDEX_FILL)
    while rows := cursor.fetchmany(10_000):
        conn.executemany(INSERT_TRAIL_INDEX, [
            index_row(seq, kind, at, turn_id, session_id, decode(data, seq), key)
            for seq, _id, kind, at, turn_id, session_id, data, key in rows])


PRUNED_TABLES = ("content_blobs", "trail_index", "audit_log")
"""The tables a prune deletes from, in the order it deletes."""

_NO_GATE_V11 = "".join(f"DROP TRIGGER IF EXISTS {t}_no_delete;\n" for t in PRUNED_TABLES) + """
DROP TRIGGER IF EXISTS overt_prune_gate_no_update;
DROP TABLE IF EXISTS overt_prune_gate;
""" + "".join(_no_delete(t, gated=False) for t in PRUNED_TABLES)


def lift_delete_guards(conn: sqlite3.Connection) -> None:
    """Drop the delete guards of :data:`PRUNED_TABLES`; only a prune does this, inside
    the transaction that deletes and then calls :func:`restore_delete_guards`."""
    for table in PRUNED_TABLES:
        conn.execute(f"DROP TRIGGER {table}_no_delete")


def restore_delete_guards(conn: sqlite3.Connection) -> None:
    """Create the delete guards :func:`lift_delete_guards` dropped, as they were."""
    for table in PRUNED_TABLES:
        conn.execute(_no_delete(table, gated=False))


MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial: audit_log chain, content_blobs, prune gate, views", _INITIAL),
    (2, "failures index counts plugin failures (hook.error)", _FAILURES_V2),
    (3, "once-only entries: one per (kind, claim)", _CLAIMS_V3),
    (4, "reasoning steps: index by phase and time, reasoning_steps view", _REASONING_V4),
    (5, "memory: nodes, links, full-text search",
     memory.sqlite(_append_only)),
    (6, "indexes that append: kind and time without the high-volume kinds, steps by time",
     _APPENDING_INDEXES_V6),
    (7, "memory search by actor: each actor's nodes together in the index",
     memory_search.sqlite(_append_only)),
    (8, "memory search ranks without per-node lengths (bm25 reads no docsize)",
     memory_search.sqlite_v8()),
    (9, "content keyed seq << 20 | n: a commit appends to one page", _CONTENT_KEYED_V9),
    (10, "trail index: each session's trail records together, bodies by key",
     _TRAIL_INDEX_V10),
    (11, "no prune gate: delete guards always abort; a prune lifts them in its transaction",
     _NO_GATE_V11),
    (12, "memory search indexes each word's first three characters (prefix search)",
     memory_search.sqlite_prefix()),
]

FILLS: dict[int, Callable[[sqlite3.Connection], None]] = {10: _fill_trail_index}
"""Python steps of a migration, run after its SQL in the same transaction."""
