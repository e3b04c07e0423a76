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

from overt.ledger import schema
from overt.ledger.chain import entry_data
from overt.ledger.schema import NAMES, derived, memory, memory_search, memory_trigrams, provenance
from overt.ledger.sql import (
    POSTGRES,
    trail_index_fill,
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

_INITIAL = FUNCTIONS + _guard("overt_migrations", gated=False) + schema.chain_table(POSTGRES) + """
CREATE TABLE content_blobs (
    seq        BIGINT NOT NULL,
    digest     TEXT NOT NULL,
    body       BYTEA NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (seq, digest)
);
""" + _guard("audit_log", gated=True) + _guard("content_blobs", gated=True) \
    + "\n" + schema.views(POSTGRES)

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
_MERKLE_NODES_V12 = schema.merkle_table(POSTGRES) + _guard("merkle_nodes", gated=False)

# The trail index keyed by (session_id, kind, seq) (see overt.ledger.trail_index.KEY).
_TRAIL_BY_KIND_V14 = (
    "ALTER TABLE trail_index DROP CONSTRAINT trail_index_pkey, "
    f"ADD CONSTRAINT trail_index_pkey PRIMARY KEY ({', '.join(KEY)});\n")

MIGRATIONS: list[tuple[int, str, str]] = [
    (version, NAMES[version], script) for version, script in sorted({
        **schema.same_on_both(POSTGRES),
        1: _INITIAL,
        5: memory.postgres(lambda t: _guard(t, gated=False)),
        7: memory_search.postgres(),
        8: "SELECT 1",
        9: "SELECT 1",
        10: _SEALED_PRUNE_V10,
        11: _TRAIL_INDEX_V11,
        12: _MERKLE_NODES_V12,
        13: "SELECT 1",  # SQLite's prefix index; GIN matches prefixes as it is
        14: _TRAIL_BY_KIND_V14,
        17: derived.postgres(),
        18: memory_trigrams.postgres(),
        19: provenance.postgres(),
    }.items())]

FILLS: dict[int, Callable[[Any], None]] = {11: fill_trail_index}
"""Python steps of a migration, run after its SQL in the same transaction."""
