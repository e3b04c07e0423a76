"""The ledger's schema: numbered migrations, one module per backend, with the same
numbers and meaning on both.

:data:`NAMES` is the one list of what each version does; each backend's module
pairs a version with the statements that do it there. Version 1, the baseline,
creates 0.1.0's schema whole. The pieces both backends share are built here;
:mod:`.memory`, :mod:`.memory_search`, :mod:`.memory_trigrams` and :mod:`.derived`
(PostgreSQL's role model) hold the rest.
"""

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from overt.clock import now_iso
from overt.errors import MigrationError
from overt.ledger.sql import (
    KIND_INDEX,
    Dialect,
    claims_index,
    direct_calls_index,
    failure_condition,
    paused_replies_index,
    reasoning_steps_view,
    reply_failures_index,
    steps_index,
    turn_order_indexes,
)

NAMES: dict[int, str] = {
    1: "baseline: the 0.1.0 format",
}
"""Every version a ledger's schema can be at, and what it does. Version 1 is 0.1.0's
format, made whole by one migration per backend. A later change to the schema is the
next number here and a migration on both backends; once a release is tagged, no
migration it shipped is edited (tests/ledger/test_baseline.py holds the digest of
each migration's statements on each backend)."""


MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS overt_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
);
"""
"""Where each backend keeps the versions applied (SQLite also guards it append-only)."""


def refuse_newer(applied: Iterable[int], ledger: str) -> None:
    """Refuse a ledger whose schema a later overt brought past the versions this one
    knows: its rows may mean what this code cannot tell, so nothing is read or written.

    Raises:
        MigrationError: which version, and what to do.
    """
    newer = max((v for v in applied if v > max(NAMES)), default=None)
    if newer is not None:
        raise MigrationError(
            f"ledger {ledger} has schema version {newer}, newer than this overt knows "
            f"(up to {max(NAMES)}); nothing was read or written. If a later overt migrated "
            f"it, upgrade overt to use it. If none did, row {newer} of overt_migrations was "
            "written by someone with write access to the database, not by overt: as the "
            "ledger's owner, remove that row (README, \"Migrations\": a row no overt wrote)")


def apply_pending(conn: Any, migrations: Sequence[tuple[int, str, str]], *, ph: str,
                  transaction: Callable[[], AbstractContextManager[Any]],
                  run: Callable[[str], None]) -> list[int]:
    """Apply on ``conn`` each of ``migrations`` not recorded yet, each in a
    ``transaction()`` of its own, after reading again what is recorded (so processes
    migrating at once each apply a migration once): its script by ``run``, then its
    row in ``overt_migrations``. The versions applied (``ph``: the placeholder)."""
    applied: list[int] = []
    for version, name, script in migrations:
        with transaction():
            if conn.execute(f"SELECT 1 FROM overt_migrations WHERE version = {ph}",
                            (version,)).fetchone():
                continue
            run(script)
            conn.execute(f"INSERT INTO overt_migrations VALUES ({ph}, {ph}, {ph})",
                         (version, name, now_iso()))
            applied.append(version)
    return applied


_VIEW_FIELDS: dict[str, tuple[str, tuple[tuple[str, str | None], ...]]] = {
    "inferences": ("inference", (
        ("inference_id", None), ("model", None), ("route", None), ("input_tokens", "bigint"),
        ("output_tokens", "bigint"), ("cost_usd", "double precision"),
        ("duration_ms", "double precision"), ("escalated", "boolean"), ("error_type", None))),
    "tool_calls": ("tool_call.completed", (
        ("tool_call_id", None), ("tool_name", None), ("triggered_by", None),
        ("caller_session_id", None), ("tool_status", None),
        ("tool_duration_ms", "double precision"), ("exc_type", None), ("args_sha256", None))),
}
"""The views of one kind's entries: each field, and its PostgreSQL type
(``None``: text; SQLite's ``json_extract`` gives each value its JSON type)."""


def _typed(d: Dialect, field: str, sql_type: str | None, column: str = "data") -> str:
    value = d.text(field, column)
    return f"({value})::{sql_type}" if sql_type and d.name != "sqlite" else value


def views(d: Dialect) -> str:
    """The views for SQL users: ``turns`` (a turn's start and its completion),
    ``inferences``, ``tool_calls`` and ``reasoning_steps``."""
    tools = ("(c.data::json -> 'tools_used')::text" if d.name != "sqlite"
             else d.text("tools_used", "c.data"))
    started = "".join(f"       {d.text(f, 's.data')} AS {f},\n"
                      for f in ("source", "caller_session_id", "model", "route"))
    turns = ("CREATE VIEW turns AS\nSELECT s.turn_id, s.session_id, s.at AS started_at,\n"
             f"{started}       c.at AS completed_at,\n"
             f"       {d.text('status', 'c.data')} AS status,\n"
             f"       {tools} AS tools_used,\n"
             f"       {_typed(d, 'duration_ms', 'double precision', 'c.data')} AS duration_ms\n"
             "FROM audit_log s\n"
             "LEFT JOIN audit_log c ON c.turn_id = s.turn_id AND c.kind = 'turn.completed'\n"
             "WHERE s.kind = 'turn.started';\n")
    return turns + "".join(
        f"\nCREATE VIEW {name} AS\nSELECT seq, at, turn_id, session_id,\n"
        + ",\n".join(f"       {_typed(d, f, t)} AS {f}" for f, t in fields)
        + f"\nFROM audit_log WHERE kind = '{kind}';\n"
        for name, (kind, fields) in _VIEW_FIELDS.items()) + f"\n{reasoning_steps_view(d)};\n"


def chain_table(d: Dialect) -> str:
    """The chain's table and every index on it that both backends keep. Each
    condition is the one its query states word for word (:mod:`overt.ledger.sql`):
    SQLite uses a partial index only for a query whose WHERE holds the index's own
    terms."""
    seq = "INTEGER" if d.name == "sqlite" else "BIGINT"
    return f"""
CREATE TABLE audit_log (
    seq        {seq} PRIMARY KEY,
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
{KIND_INDEX};
{steps_index(d)};
CREATE INDEX audit_log_failures ON audit_log (seq) WHERE {failure_condition(d)};
{claims_index(d)};
{reply_failures_index(d)};
{direct_calls_index(d)};
{paused_replies_index(d)};
{turn_order_indexes(d)}"""


def merkle_table(d: Dialect) -> str:
    """The Merkle tree's stored subtrees (:mod:`overt.ledger.tree`): written when a
    checkpoint is made and when a prune removes leaves, never on a turn's path; never
    pruned."""
    leaf = "INTEGER" if d.name == "sqlite" else "BIGINT"
    return f"""
CREATE TABLE merkle_nodes (
    level      INTEGER NOT NULL,
    first_leaf {leaf} NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX merkle_nodes_at ON merkle_nodes (level, first_leaf);
"""
