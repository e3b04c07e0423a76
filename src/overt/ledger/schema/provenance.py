"""Migration 19: memory provenance. Each memory row names what wrote it.

``memory_nodes``, ``memory_links`` and ``memory_link_retractions`` gain
``session_id``, ``tool_call_id`` and ``origin`` (``tool``, ``api`` or ``cli``:
:data:`overt.events.MemoryOrigin`), beside the ``turn_id`` they had; the entry
recording each row (``node.created``, ``node.superseded``, ``link.created``,
``link.retracted``) says the same, so the chain covers it and ``verify``
(:mod:`overt.ledger.memory_check`) compares them. Rows written before are filled
from their entries (``session_id`` and ``tool_call_id``; their entries name no
origin, so neither do they), inside the migration's transaction, with the
append-only guard lifted for that statement only.

On PostgreSQL the owner's ``overt_write_<table>`` functions (migration 17,
:mod:`overt.ledger.schema.derived`) are replaced: besides what they checked, the
row's session, tool call and origin must be its entry's, and the entry's
provenance must hold (:func:`provenance_sql`): a write naming a tool call is
recorded while that call runs (of the entries before it that start or complete
the call, or end its turn, the newest is the call's ``tool_call.started``, in the
same turn and session); a write from the API or the CLI names no turn and no call.
So the writer role cannot claim a revision came from another conversation's
turn or tool call.

The guard builders come from the dialect's schema module (passed in, since that
module imports this one).
"""

from __future__ import annotations

from collections.abc import Callable

from overt.ledger.schema.derived import (
    MEMORY_ID,
    MEMORY_WRITES,
    Stamps,
    WriteSpec,
    _said,
    write_function,
)
from overt.ledger.sql import DIRECT_CALLS, KIND_INDEXED

TABLES = {"memory_nodes": ("id", "'node.created', 'node.superseded'", "node_id"),
          "memory_links": ("id", "'link.created'", "link_id"),
          "memory_link_retractions": ("link_id", "'link.retracted'", "link_id")}
"""Each memory table: its id column, the kinds of entry recording a row, and the
entry's field naming the row."""

COLUMNS = ("session_id", "tool_call_id", "origin")


def _columns() -> str:
    return "".join(f"ALTER TABLE {table} ADD COLUMN {column} TEXT;\n"
                   for table in TABLES for column in COLUMNS)


def sqlite(no_update: Callable[[str], str]) -> str:
    """The SQLite migration; ``no_update(table)`` is the DDL of ``table``'s update guard."""
    fills = []
    for table, (key, kinds, field) in TABLES.items():
        # the newest entry recording each row (SQLite takes a bare column's value from
        # the row that gave max())
        fills.append(f"""DROP TRIGGER {table}_no_update;
UPDATE {table} SET session_id = w.session_id, tool_call_id = w.tool_call_id
    FROM (SELECT json_extract(data, '$.{field}') AS row_id, session_id,
                 json_extract(data, '$.tool_call_id') AS tool_call_id, max(seq)
          FROM audit_log WHERE kind IN ({kinds}) AND {KIND_INDEXED} GROUP BY 1) w
    WHERE w.row_id = {table}.{key};
{no_update(table)}""")
    return _columns() + "".join(fills)


def postgres() -> str:
    """The PostgreSQL migration."""
    fills = []
    for table, (key, kinds, _) in TABLES.items():
        fills.append(f"""ALTER TABLE {table} DISABLE TRIGGER {table}_append_only;
UPDATE {table} t SET session_id = w.session_id, tool_call_id = w.tool_call_id
    FROM (SELECT DISTINCT ON ({MEMORY_ID}) {MEMORY_ID} AS row_id, session_id,
                 data::json ->> 'tool_call_id' AS tool_call_id
          FROM audit_log WHERE kind IN ({kinds}) ORDER BY {MEMORY_ID}, seq DESC) w
    WHERE w.row_id = t.{key};
ALTER TABLE {table} ENABLE TRIGGER {table}_append_only;
""")
    return _columns() + "".join(fills) + _RUNNING + "".join(map(_stamped, MEMORY_WRITES))


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


_STAMPS = [("session_id", "text"), ("tool_call_id", "text"), ("origin", "text")]


def _checks() -> list[str]:
    return ["e.session_id IS NOT DISTINCT FROM p_session_id",
            _said("tool_call_id", "p_tool_call_id"), _said("origin", "p_origin"),
            provenance_sql()]


def _stamped(spec: WriteSpec) -> str:
    """``spec``'s function again, taking and checking the provenance columns."""
    return write_function(spec, Stamps(_STAMPS, _checks(), _REFUSAL))


_REFUSAL = "or names a turn or tool call that entry cannot have come from"
