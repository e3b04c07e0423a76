"""The PostgreSQL ledger's migrations: the same tables and meaning as SQLite's.

Differences, each for a reason: content bodies are ``bytea`` (PostgreSQL text
cannot hold NUL, and a tool result may), keyed by (seq, digest); ``data`` stays
``text`` because the chain hashes its exact bytes (``jsonb`` would reorder and
reformat them), and queries read fields through ``data::json``. Append-only is
enforced by a trigger function on every ledger table, for every role, plus a
``TRUNCATE`` guard. A prune deletes through the ``overt_prune`` function, owned by
the ledger's owner role; no session setting opens a guard. The writer role may write
only the chain's two tables (:mod:`.derived`): every other table is written by the
owner's triggers and functions, which derive or check each row from the chain.
"""

from __future__ import annotations

from overt.ledger import schema
from overt.ledger.schema import NAMES, derived, memory, memory_search, memory_trigrams
from overt.ledger.sql import POSTGRES
from overt.ledger.trail_index import table_sql

# The guard trusts nothing a session can set. A DELETE on audit_log, content_blobs or
# trail_index passes only when the role running it is the owner of overt_prune (the
# ledger's owner role; inside the SECURITY DEFINER function that is every caller
# allowed to execute it), and only for seqs at or before the through_seq sealed by
# the newest ledger.pruned entry of the chain.
FUNCTIONS = """
CREATE FUNCTION overt_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
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
"""


def _guard(table: str, *, gated: bool) -> str:
    arg = "'gated'" if gated else ""
    return f"""
CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION overt_append_only({arg});
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION overt_append_only();
"""


_CONTENT = """
CREATE TABLE content_blobs (
    seq        BIGINT NOT NULL,
    digest     TEXT NOT NULL,
    body       BYTEA NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (seq, digest)
);
"""

# overt_prune(through) deletes only when the ledger.pruned entry sealing ``through``
# is the chain's head (just appended, in the caller's transaction), and exactly
# through it.
_PRUNE = """
CREATE FUNCTION overt_sealed_through() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT (data::json ->> 'through_seq')::bigint FROM audit_log
                     WHERE kind = 'ledger.pruned' ORDER BY seq DESC LIMIT 1), 0)
$$;

CREATE FUNCTION overt_prune(through bigint) RETURNS bigint
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

BASELINE = (
    FUNCTIONS + _guard("overt_migrations", gated=False)
    + schema.chain_table(POSTGRES) + _guard("audit_log", gated=True)
    + _CONTENT + _guard("content_blobs", gated=True)
    + "\n" + schema.views(POSTGRES)
    + memory.tables(lambda t: _guard(t, gated=False))
    + memory_search.postgres() + memory_trigrams.postgres()
    # the trail index (overt.ledger.trail_index), derived by the owner's trigger
    # (derived.py), pruned by overt_prune with the entries it indexes
    + table_sql(postgres=True) + _guard("trail_index", gated=True) + _PRUNE
    + schema.merkle_table(POSTGRES) + _guard("merkle_nodes", gated=False)
    + derived.postgres())
"""0.1.0's schema, whole (migration 1)."""

MIGRATIONS: list[tuple[int, str, str]] = [(1, NAMES[1], BASELINE)]
