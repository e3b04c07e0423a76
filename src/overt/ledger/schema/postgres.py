"""Numbered migrations of the PostgreSQL ledger: the same tables and meaning as SQLite's.

Differences, each for a reason: content bodies are ``bytea`` (PostgreSQL text
cannot hold NUL, and a tool result may); ``data`` stays ``text`` because the
chain hashes its exact bytes (``jsonb`` would reorder and reformat them), and
queries read fields through ``data::json``. Append-only is enforced by a
trigger function on every ledger table, for every role, plus a ``TRUNCATE``
guard. A prune deletes through the ``overt_prune`` function (migration 10),
owned by the ledger's owner role; no session setting opens a guard. Migrations
8 and 9 change SQLite's storage layout; PostgreSQL's already had their shape, so
here they are recorded and change nothing. Migration 17 (:mod:`.derived`) leaves the
writer role only the chain's two tables to write: every other table is written by
the owner's triggers and functions, which derive or check each row from the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from overt.ledger.chain import entry_data
from overt.ledger.schema import NAMES, derived, memory, memory_search, memory_trigrams, provenance
from overt.ledger.sql import (
    POSTGRES,
    appending_indexes,
    claims_index,
    direct_calls_index,
    failure_condition,
    paused_replies_index,
    reasoning_phase_index,
    reasoning_steps_view,
    reply_failures_index,
    trail_index_fill,
    turn_order_indexes,
)
from overt.ledger.trail_index import COLUMNS, KEY, index_row, table_sql

FUNCTIONS = """
CREATE OR REPLACE FUNCTION overt_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_NARGS > 0 THEN
        IF OLD.seq <= coalesce(
                nullif(current_setting('overt.prune_through', true), '')::bigint, 0) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION 'overt ledger is append-only: % on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
"""


def _guard(table: str, *, gated: bool) -> str:
    arg = "'gated'" if gated else ""
    return f"""
CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION overt_append_only({arg});
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION overt_append_only();
"""


MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS overt_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
);
"""

_j = POSTGRES.text

_INITIAL = FUNCTIONS + _guard("overt_migrations", gated=False) + f"""
CREATE TABLE audit_log (
    seq        BIGINT PRIMARY KEY,
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
CREATE INDEX audit_log_failures ON audit_log (seq) WHERE {failure_condition(POSTGRES, 1)};

CREATE TABLE content_blobs (
    seq        BIGINT NOT NULL,
    digest     TEXT NOT NULL,
    body       BYTEA NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (seq, digest)
);
""" + _guard("audit_log", gated=True) + _guard("content_blobs", gated=True) + f"""
CREATE VIEW turns AS
SELECT s.turn_id, s.session_id, s.at AS started_at,
       {_j('source', 's.data')} AS source,
       {_j('caller_session_id', 's.data')} AS caller_session_id,
       {_j('model', 's.data')} AS model,
       {_j('route', 's.data')} AS route,
       c.at AS completed_at,
       {_j('status', 'c.data')} AS status,
       (c.data::json -> 'tools_used')::text AS tools_used,
       ({_j('duration_ms', 'c.data')})::double precision AS duration_ms
FROM audit_log s
LEFT JOIN audit_log c ON c.turn_id = s.turn_id AND c.kind = 'turn.completed'
WHERE s.kind = 'turn.started';

CREATE VIEW inferences AS
SELECT seq, at, turn_id, session_id,
       {_j('inference_id')} AS inference_id,
       {_j('model')} AS model,
       {_j('route')} AS route,
       ({_j('input_tokens')})::bigint AS input_tokens,
       ({_j('output_tokens')})::bigint AS output_tokens,
       ({_j('cost_usd')})::double precision AS cost_usd,
       ({_j('duration_ms')})::double precision AS duration_ms,
       ({_j('escalated')})::boolean AS escalated,
       {_j('error_type')} AS error_type
FROM audit_log WHERE kind = 'inference';

CREATE VIEW tool_calls AS
SELECT seq, at, turn_id, session_id,
       {_j('tool_call_id')} AS tool_call_id,
       {_j('tool_name')} AS tool_name,
       {_j('triggered_by')} AS triggered_by,
       {_j('caller_session_id')} AS caller_session_id,
       {_j('tool_status')} AS tool_status,
       ({_j('tool_duration_ms')})::double precision AS tool_duration_ms,
       {_j('exc_type')} AS exc_type,
       {_j('args_sha256')} AS args_sha256
FROM audit_log WHERE kind = 'tool_call.completed';
"""

_FAILURES_V2 = f"""
DROP INDEX audit_log_failures;
CREATE INDEX audit_log_failures ON audit_log (seq) WHERE {failure_condition(POSTGRES)};
"""

_CLAIMS_V3 = claims_index(POSTGRES) + ";\n"

_REASONING_V4 = reasoning_phase_index(POSTGRES) + ";\n" + reasoning_steps_view(POSTGRES) + ";\n"

# Indexes whose pages a commit appends to, not one page per kind or phase it holds.
_APPENDING_INDEXES_V6 = appending_indexes(POSTGRES)

# Migration 10: the guard trusts nothing a session can set. A DELETE on audit_log or
# content_blobs passes only when the role running it is the owner of overt_prune (the
# ledger's owner role; inside the SECURITY DEFINER function that is every caller
# allowed to execute it), and only for seqs at or before the through_seq sealed by
# the newest ledger.pruned entry of the chain. overt_prune(through) deletes only
# when that entry is the chain's head (just appended, in the caller's transaction)
# and seals exactly ``through``.
_SEALED_PRUNE_V10 = """
CREATE OR REPLACE FUNCTION overt_sealed_through() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT (data::json ->> 'through_seq')::bigint FROM audit_log
                     WHERE kind = 'ledger.pruned' ORDER BY seq DESC LIMIT 1), 0)
$$;

CREATE OR REPLACE FUNCTION overt_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_NARGS > 0 THEN
        IF current_user = (SELECT pg_get_userbyid(p.proowner) FROM pg_proc p
                           WHERE p.oid = 'overt_prune(bigint)'::regprocedure)
           AND OLD.seq <= overt_sealed_through() THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION 'overt ledger is append-only: % on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE OR REPLACE FUNCTION overt_prune(through bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    head_kind text;
    removed bigint;
BEGIN
    SELECT kind INTO head_kind FROM audit_log ORDER BY seq DESC LIMIT 1;
    IF head_kind IS DISTINCT FROM 'ledger.pruned' OR overt_sealed_through() <> through THEN
        RAISE EXCEPTION 'overt_prune: no sealed prune record at the head for seq %', through
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    DELETE FROM content_blobs WHERE seq <= through;
    DELETE FROM audit_log WHERE seq <= through;
    GET DIAGNOSTICS removed = ROW_COUNT;
    RETURN removed;
END $$;
REVOKE ALL ON FUNCTION overt_prune(bigint) FROM PUBLIC;
"""

# The trail index (see overt.ledger.trail_index), filled from the chain by FILLS[11];
# overt_prune deletes its rows with the entries they index.
_TRAIL_INDEX_V11 = table_sql(postgres=True) + _guard("trail_index", gated=True) + """
CREATE OR REPLACE FUNCTION overt_prune(through bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    head_kind text;
    removed bigint;
BEGIN
    SELECT kind INTO head_kind FROM audit_log ORDER BY seq DESC LIMIT 1;
    IF head_kind IS DISTINCT FROM 'ledger.pruned' OR overt_sealed_through() <> through THEN
        RAISE EXCEPTION 'overt_prune: no sealed prune record at the head for seq %', through
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    DELETE FROM content_blobs WHERE seq <= through;
    DELETE FROM trail_index WHERE seq <= through;
    DELETE FROM audit_log WHERE seq <= through;
    GET DIAGNOSTICS removed = ROW_COUNT;
    RETURN removed;
END $$;
REVOKE ALL ON FUNCTION overt_prune(bigint) FROM PUBLIC;
"""


def fill_trail_index(conn: Any) -> None:
    """Index the trail entries already in the chain (migration 11)."""
    rows = conn.execute(trail_index_fill(POSTGRES)).fetchall()
    with conn.cursor() as cur, cur.copy(COPY_TRAIL_INDEX) as copy:
        for seq, kind, at, turn_id, session_id, data, body_seq in rows:
            copy.write_row(index_row(seq, kind, at, turn_id, session_id, entry_data(data, seq),
                                     body_seq))
    # statistics now, not when autovacuum gets to it (if it runs): without them the
    # planner guesses a session holds a hundred rows
    conn.execute("ANALYZE trail_index")


COPY_TRAIL_INDEX = f"COPY trail_index ({', '.join(COLUMNS)}) FROM STDIN"

# The Merkle tree's stored subtrees (see overt.ledger.tree), append-only, never pruned.
_MERKLE_NODES_V12 = """
CREATE TABLE merkle_nodes (
    level      INTEGER NOT NULL,
    first_leaf BIGINT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX merkle_nodes_at ON merkle_nodes (level, first_leaf);
""" + _guard("merkle_nodes", gated=False)

# The trail index keyed by (session_id, kind, seq) (see overt.ledger.trail_index.KEY).
_TRAIL_BY_KIND_V14 = (
    "ALTER TABLE trail_index DROP CONSTRAINT trail_index_pkey, "
    f"ADD CONSTRAINT trail_index_pkey PRIMARY KEY ({', '.join(KEY)});\n")

_APPROVAL_READS_V16 = f"{direct_calls_index(POSTGRES)};\n{paused_replies_index(POSTGRES)};\n"

MIGRATIONS: list[tuple[int, str, str]] = [
    (version, NAMES[version], script) for version, script in (
        (1, _INITIAL),
        (2, _FAILURES_V2),
        (3, _CLAIMS_V3),
        (4, _REASONING_V4),
        (5, memory.postgres(lambda t: _guard(t, gated=False))),
        (6, _APPENDING_INDEXES_V6),
        (7, memory_search.postgres()),
        (8, "SELECT 1"),
        (9, "SELECT 1"),
        (10, _SEALED_PRUNE_V10),
        (11, _TRAIL_INDEX_V11),
        (12, _MERKLE_NODES_V12),
        (13, "SELECT 1"),  # SQLite's prefix index; GIN matches prefixes as it is
        (14, _TRAIL_BY_KIND_V14),
        (15, reply_failures_index(POSTGRES) + ";\n"),
        (16, _APPROVAL_READS_V16),
        (17, derived.postgres()),
        (18, memory_trigrams.postgres()),
        (19, provenance.postgres()),
        (20, turn_order_indexes(POSTGRES)),
    )]

FILLS: dict[int, Callable[[Any], None]] = {11: fill_trail_index}
"""Python steps of a migration, run after its SQL in the same transaction."""
