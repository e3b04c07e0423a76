"""PostgreSQL's role model: the writer appends; every other table is written by the
owner's code.

The writer role (``overt ledger setup-roles``) keeps ``INSERT`` on ``audit_log`` and
``content_blobs`` only, and ``SELECT`` on everything. Every other table is written
by functions the ledger's owner owns, ``SECURITY DEFINER`` (they run with the
owner's rights) and with a fixed ``search_path`` (the ledger's schema, then
``pg_temp``: a temporary table of the caller's cannot stand in for a ledger
table). Each derives or checks what it writes from the chain, so a derived row
cannot say what the chain does not:

- ``trail_index``: a trigger on ``audit_log`` (``audit_log_trail_index``, once per
  statement, over the statement's new rows) computes each trail entry's row in SQL
  exactly as :func:`overt.ledger.trail_index.index_row` does
  (:func:`overt.ledger.sql.trail_index_derive`). The writer does not send it.
- ``memory_nodes``, ``memory_links``, ``memory_link_retractions``: written through
  ``overt_write_<table>(p_<column> => ...)`` (:func:`overt.ledger.sql.insert_row`),
  which inserts the row only if the newest entry recording it (``node.created``,
  ``node.superseded``, ``link.created``, ``link.retracted``, found through the index
  ``audit_log_memory``) says what the row says: ids, kinds, actor, turn, session,
  tool call, origin, and the digests of the node's title and body, computed here;
  and only if that entry's provenance holds (:func:`provenance_sql`): a write
  naming a tool call is recorded while that call runs (of the entries before it
  that start or complete the call, or end its turn, the newest is the call's
  ``tool_call.started``, in the same turn and session); a write from the API or
  the CLI names no turn and no call. So the writer role cannot claim a revision
  came from another conversation's turn or tool call. What ``verify`` checks
  afterwards (:mod:`overt.ledger.memory_check`) is refused before it is written.
- ``memory_search``, ``memory_trigrams`` (and their partitions): the triggers on
  ``memory_nodes`` that index a node (:mod:`.memory_search`, :mod:`.memory_trigrams`)
  run as the owner.
- ``merkle_nodes``: ``overt_write_merkle_nodes`` stores a subtree of at most
  2**8 leaves (the checkpointer's tiles and leaf 0) only if the hash given is the
  one it recomputes from the entries' chain hashes (where a prune removed
  leaves, from the subtrees the prune stored for them). A prune's own stand-ins are
  written by the owner, in the prune's transaction.
- ``overt_migrations``: only ``overt ledger migrate``, as the owner.

And a ``ledger.pruned`` entry is appended only by the ledger's owner (the role a
prune runs as): a trigger refuses one from any other role, so the writer cannot
seal a range it did not prune.

A new table beside the chain gets the same treatment: rows a trigger derives
(its function ``SECURITY DEFINER`` with ``SET search_path FROM CURRENT``), or rows
the writer hands over through ``overt_write_<table>``, which checks them; ``setup-roles``
grants the writer ``SELECT`` on every table and ``EXECUTE`` on every
``overt_write_*`` function, nothing else. ``CREATE OR REPLACE FUNCTION`` resets
``SECURITY DEFINER``: a migration that replaces one of these functions states it again.
"""

from __future__ import annotations

from typing import NamedTuple

from overt.ledger.sql import DIRECT_CALLS, KIND_INDEXED, WRITE_FUNCTION_PREFIX, trail_index_derive
from overt.ledger.tree import TILE_LEVEL

_DEFINER = "SECURITY DEFINER SET search_path FROM CURRENT"
"""What each function that writes for the writer states (migrations run with the
ledger's schema, then ``pg_temp``, as their ``search_path``: see
:func:`overt.ledger.pg_migrate.migrate`)."""

MEMORY_KINDS = ("node.created", "node.superseded", "link.created", "link.retracted")
MEMORY_ID = "coalesce(data::json ->> 'node_id', data::json ->> 'link_id')"
"""The id of the memory row an entry of :data:`MEMORY_KINDS` records (the indexed
expression of ``audit_log_memory``; a lookup states it word for word)."""
_MEMORY = ", ".join(f"'{k}'" for k in MEMORY_KINDS)


def _digest(text: str) -> str:
    """SQL: :func:`overt.ledger.canonical.digest_text` of the text expression ``text``."""
    return f"'sha256:' || encode(sha256(convert_to({text}, 'UTF8')), 'hex')"


def _said(field: str, value: str) -> str:
    """SQL: entry ``e``'s data says ``value`` (a SQL expression) in ``field``, as
    Python compares them (a missing field is ``null``)."""
    return (f"coalesce(e.d -> '{field}', 'null'::jsonb) = "
            f"coalesce(to_jsonb({value}), 'null'::jsonb)")


_TAGS = ("('zk' || lower(p_kind COLLATE \"C\") || ' za' || translate(left(encode(sha256("
         "convert_to(p_actor, 'UTF8')), 'hex'), 24), '0123456789abcdef', 'abcdefghijklmnop'))")
"""SQL: :func:`overt.ledger.reads.memory_search.tags` of ``p_kind`` and ``p_actor`` (node kinds
are ASCII: :mod:`overt.memory.kinds`)."""


class WriteSpec(NamedTuple):
    """An ``overt_write_<table>`` function: its parameters (``p_<name>``, each a column
    of ``table``), the entry kinds that record the row, the parameter naming the row,
    the row's name in an error, and the checks the newest such entry must pass."""

    table: str
    params: list[tuple[str, str]]
    kinds: str
    row_id: str
    noun: str
    checks: list[str]


def write_function(spec: WriteSpec) -> str:
    """``overt_write_<table>``: insert the row if the newest entry of ``kinds``
    recording ``row_id`` passes every one of ``checks`` (SQL over entry ``e``: its
    ``seq``, ``kind``, ``turn_id``, ``session_id`` and data as ``jsonb``, ``d``)."""
    args = ", ".join(f"p_{name} {kind}" for name, kind in spec.params)
    columns = ", ".join(name for name, _ in spec.params)
    values = ", ".join(f"p_{name}" for name, _ in spec.params)
    ok = "\n            AND ".join(f"({c})" for c in spec.checks)
    table, kinds, row_id, noun = spec.table, spec.kinds, spec.row_id, spec.noun
    return f"""
CREATE FUNCTION {WRITE_FUNCTION_PREFIX}{table}({args}) RETURNS void
LANGUAGE plpgsql {_DEFINER} AS $$
DECLARE
    e record;
BEGIN
    SELECT a.seq, a.kind, a.turn_id, a.session_id, a.data::jsonb AS d INTO e FROM audit_log a
        WHERE a.kind IN ({kinds}) AND {MEMORY_ID.replace('data', 'a.data')} = {row_id}
        ORDER BY a.seq DESC LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'overt: no entry of the chain records the {noun} %', {row_id}
            USING ERRCODE = 'check_violation';
    END IF;
    IF NOT coalesce({ok}, false) THEN
        RAISE EXCEPTION 'overt: the {noun} % does not match entry % (%) that records it, '
            'or names a turn or tool call that entry cannot have come from',
            {row_id}, e.seq, e.kind USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO {table} ({columns}) VALUES ({values});
END $$;
"""


_CALL = "(data::json ->> 'tool_call_id')"

# Whether tool call p_call was running at entry p_seq, in turn p_turn (or outside any
# turn, p_turn null: read through the direct calls' index) and session p_session: the
# newest entry before p_seq that starts or completes the call, or ends the turn, is
# the call's start. Read backwards from p_seq, it stops at that entry (near, for a
# write made while its call runs). Plain SQL over the chain, no rights of its own;
# only the owner's functions call it. As overt.ledger.memory_check.call_running
# decides it, pruned ledgers included.
_RUNNING = f"""
CREATE FUNCTION overt_memory_call_running(p_seq bigint, p_turn text, p_session text,
                                          p_call text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    r record;
BEGIN
    IF p_turn IS NULL THEN
        SELECT kind, session_id INTO r FROM audit_log WHERE {DIRECT_CALLS}
            AND {_CALL} = p_call AND seq < p_seq ORDER BY seq DESC LIMIT 1;
    ELSE
        SELECT kind, session_id INTO r FROM audit_log WHERE turn_id = p_turn AND seq < p_seq
            AND (kind = 'turn.completed' OR (kind IN ('tool_call.started',
                 'tool_call.completed') AND {_CALL} = p_call))
            ORDER BY seq DESC LIMIT 1;
    END IF;
    IF FOUND THEN
        RETURN r.kind = 'tool_call.started'
            AND coalesce(r.session_id, '') = coalesce(p_session, '');
    END IF;
    -- none: its start may have gone with a pruned range
    RETURN EXISTS (SELECT 1 FROM audit_log WHERE kind = 'ledger.pruned' AND {KIND_INDEXED})
        AND (p_turn IS NULL OR NOT EXISTS (SELECT 1 FROM audit_log t
                                           WHERE t.turn_id = p_turn AND t.kind = 'turn.started'));
END $$;
"""


def provenance_sql() -> str:
    """SQL over entry ``e`` (its ``seq``, ``turn_id``, ``session_id``, data as ``jsonb``
    ``d``): its provenance holds, as :func:`overt.ledger.memory_check.provenance_problem`
    decides it."""
    origin, call = "(e.d ->> 'origin')", "(e.d ->> 'tool_call_id')"
    return (f"CASE WHEN {call} IS NOT NULL THEN coalesce({origin}, 'tool') = 'tool' "
            "AND overt_memory_call_running(e.seq, e.turn_id, e.session_id, "
            f"{call}) WHEN {origin} IS NULL THEN true "
            f"ELSE {origin} IN ('api', 'cli') AND e.turn_id IS NULL END")


_PROVENANCE = [("session_id", "text"), ("tool_call_id", "text"), ("origin", "text")]
"""The parameters every memory write ends with: the row's provenance columns."""


def _provenance_checks() -> list[str]:
    return ["e.session_id IS NOT DISTINCT FROM p_session_id",
            _said("tool_call_id", "p_tool_call_id"), _said("origin", "p_origin"),
            provenance_sql()]


MEMORY_WRITES = (
    WriteSpec(
        "memory_nodes",
        [("id", "text"), ("kind", "text"), ("title", "text"), ("body", "text"),
         ("actor", "text"), ("created_at", "text"), ("supersedes", "text"),
         ("root_id", "text"), ("revision", "bigint"), ("turn_id", "text"),
         ("search_tags", "text"), *_PROVENANCE],
        "'node.created', 'node.superseded'", "p_id", "memory node",
        [_said("node_kind", "p_kind"), _said("actor", "p_actor"),
         _said("title_digest", _digest("p_title")), _said("body_digest", _digest("p_body")),
         "e.turn_id IS NOT DISTINCT FROM p_turn_id",
         f"p_search_tags IS NOT DISTINCT FROM {_TAGS}",
         "CASE WHEN e.kind = 'node.created' THEN p_supersedes IS NULL "
         "AND p_root_id IS NOT DISTINCT FROM p_id AND p_revision IS NOT DISTINCT FROM 1 "
         f"ELSE {_said('supersedes', 'p_supersedes')} AND {_said('root_id', 'p_root_id')} "
         f"AND {_said('revision', 'p_revision')} END", *_provenance_checks()]),
    WriteSpec(
        "memory_links",
        [("id", "text"), ("kind", "text"), ("from_id", "text"), ("to_id", "text"),
         ("actor", "text"), ("created_at", "text"), ("turn_id", "text"), *_PROVENANCE],
        "'link.created'", "p_id", "memory link",
        [_said("link_kind", "p_kind"), _said("from_id", "p_from_id"),
         _said("to_id", "p_to_id"), _said("actor", "p_actor"),
         "e.turn_id IS NOT DISTINCT FROM p_turn_id", *_provenance_checks()]),
    WriteSpec(
        "memory_link_retractions",
        [("link_id", "text"), ("actor", "text"), ("created_at", "text"), ("turn_id", "text"),
         *_PROVENANCE],
        "'link.retracted'", "p_link_id", "retraction of memory link",
        [_said("actor", "p_actor"), "e.turn_id IS NOT DISTINCT FROM p_turn_id",
         *_provenance_checks()]),
)
"""The memory tables' ``overt_write_*`` functions."""

# The subtree of 2**p_level leaves from leaf p_first, from the entries' chain hashes
# (RFC 9162: a leaf is sha256(0x00 || chain hash), a node sha256(0x01 || left || right),
# see overt.ledger.merkle). Where leaves are gone (a prune), the subtree the prune
# stored for them stands in; nothing else stored is used.
_MERKLE = f"""
CREATE FUNCTION overt_merkle_subtree(p_level integer, p_first bigint) RETURNS bytea
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := 1::bigint << p_level;
    h bytea[];
    m integer;
    stored text;
BEGIN
    h := ARRAY(SELECT sha256('\\x00'::bytea || convert_to(hash, 'UTF8')) FROM audit_log
               WHERE seq > p_first AND seq <= p_first + n ORDER BY seq);
    m := cardinality(h);
    IF m = n THEN  -- every leaf there: hash level by level, in place
        WHILE m > 1 LOOP
            FOR i IN 1 .. m / 2 LOOP
                h[i] := sha256('\\x01'::bytea || h[2 * i - 1] || h[2 * i]);
            END LOOP;
            m := m / 2;
        END LOOP;
        RETURN h[1];
    END IF;
    SELECT hash INTO stored FROM merkle_nodes WHERE level = p_level AND first_leaf = p_first
        LIMIT 1;
    IF stored IS NOT NULL THEN
        RETURN decode(stored, 'hex');
    END IF;
    IF p_level = 0 THEN
        RAISE EXCEPTION 'overt: entry % is not in the ledger and no stored subtree stands in '
            'for it', p_first + 1 USING ERRCODE = 'check_violation';
    END IF;
    RETURN sha256('\\x01'::bytea || overt_merkle_subtree(p_level - 1, p_first)
                  || overt_merkle_subtree(p_level - 1, p_first + n / 2));
END $$;

CREATE FUNCTION {WRITE_FUNCTION_PREFIX}merkle_nodes(p_level bigint, p_first_leaf bigint,
                                                    p_hash text) RETURNS void
LANGUAGE plpgsql {_DEFINER} AS $$
BEGIN
    IF p_level IS NULL OR p_first_leaf IS NULL OR p_level < 0 OR p_level > {TILE_LEVEL}
            OR p_first_leaf < 0 OR p_first_leaf % (1::bigint << p_level::integer) <> 0 THEN
        RAISE EXCEPTION 'overt: only a subtree of at most 2**{TILE_LEVEL} leaves, aligned, is '
            'stored this way (not 2**% leaves at %)', p_level, p_first_leaf
            USING ERRCODE = 'check_violation';
    END IF;
    IF p_hash IS DISTINCT FROM encode(overt_merkle_subtree(p_level::integer, p_first_leaf),
                                      'hex') THEN
        RAISE EXCEPTION 'overt: % is not the hash of the subtree of 2**% leaves at % (recomputed '
            'from its entries)', p_hash, p_level, p_first_leaf USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO merkle_nodes (level, first_leaf, hash) VALUES (p_level, p_first_leaf, p_hash);
END $$;
"""

_TRAIL = f"""
CREATE FUNCTION overt_trail_index() RETURNS trigger LANGUAGE plpgsql {_DEFINER} AS $$
BEGIN
    {trail_index_derive("overt_appended")};
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION overt_trail_index() FROM PUBLIC;
CREATE TRIGGER audit_log_trail_index AFTER INSERT ON audit_log
    REFERENCING NEW TABLE AS overt_appended
    FOR EACH STATEMENT EXECUTE FUNCTION overt_trail_index();
"""

_PRUNED_BY_OWNER = """
CREATE FUNCTION overt_pruned_by_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_user IS DISTINCT FROM
            (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = TG_RELID) THEN
        RAISE EXCEPTION 'overt ledger: a ledger.pruned entry is appended only by a prune, '
            'run as the ledger''s owner (not %)', current_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER audit_log_pruned_by_owner AFTER INSERT ON audit_log
    FOR EACH ROW WHEN (NEW.kind = 'ledger.pruned') EXECUTE FUNCTION overt_pruned_by_owner();
"""

def postgres() -> str:
    """The owner's index, functions and triggers that write for the writer (SQLite has
    no roles: there is nothing of this there)."""
    return (f"CREATE INDEX audit_log_memory ON audit_log (kind, ({MEMORY_ID})) "
            f"WHERE kind IN ({_MEMORY});\n" + _RUNNING
            + "".join(map(write_function, MEMORY_WRITES))
            + _MERKLE + _TRAIL + _PRUNED_BY_OWNER)
