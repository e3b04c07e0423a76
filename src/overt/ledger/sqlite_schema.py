"""Numbered migrations of the SQLite ledger.

Each migration runs once, in its own transaction, and is recorded in
``overt_migrations``; running them again is a no-op. Append-only is enforced
by triggers: an ``UPDATE`` or ``DELETE`` on any ledger table is aborted by the
database itself, whatever code issues it.
"""

from __future__ import annotations

APPEND_ONLY_MESSAGE = "overt ledger is append-only"


def _append_only(table: str) -> str:
    return f"""
CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table}
BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: UPDATE on {table}'); END;
CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}
BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: DELETE on {table}'); END;
"""


MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS overt_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
);
""" + _append_only("overt_migrations")


# An entry that records a failure; shared by the partial index and its query.
FAILURE_CONDITION = (
    "(kind = 'turn.completed' AND json_extract(data, '$.status') != 'completed')"
    " OR (kind = 'tool_call.completed' AND json_extract(data, '$.tool_status') != 'ok')"
    " OR (kind = 'inference' AND json_extract(data, '$.error_type') IS NOT NULL)"
)

_INITIAL = """
CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
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
CREATE INDEX audit_log_failures ON audit_log (seq) WHERE """ + FAILURE_CONDITION + """;

CREATE TABLE content_blobs (
    digest     TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
""" + _append_only("audit_log") + _append_only("content_blobs") + """
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

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial: audit_log chain, content_blobs, views", _INITIAL),
]
