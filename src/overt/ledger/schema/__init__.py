"""Numbered migrations, one module per backend, with the same numbers and meaning on both.

:data:`NAMES` is the one list of what each version does; each backend's module
pairs a version with the statements that do it there (a step that the other
backend's layout already satisfies is recorded, and changes nothing).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from overt.clock import now_iso
from overt.errors import MigrationError
from overt.ledger.sql import (
    Dialect,
    appending_indexes,
    claims_index,
    direct_calls_index,
    failure_condition,
    paused_replies_index,
    reasoning_phase_index,
    reasoning_steps_view,
    reply_failures_index,
    turn_order_indexes,
)

NAMES: dict[int, str] = {
    1: "initial: audit_log chain, content_blobs, append-only guards, views",
    2: "failures index counts plugin failures (hook.error)",
    3: "once-only entries: one per (kind, claim)",
    4: "reasoning steps: index by phase and time, reasoning_steps view",
    5: "memory: nodes, links, full-text search",
    6: "indexes that append: kind and time without the high-volume kinds, steps by time",
    7: "memory search by actor: each actor's nodes together in the index",
    8: "memory search ranks without per-node lengths (SQLite's index; PostgreSQL's already)",
    9: "content keyed so a commit appends to one page (SQLite: seq << 20 | n)",
    10: "prunes only through the sealed path: no row or session setting opens a guard",
    11: "trail index in plain columns: each session's trail entries together",
    12: "Merkle tree: stored subtrees (tiles of 256 entries, a prune's edge)",
    13: "memory search indexes each word's first three characters (SQLite; GIN already does)",
    14: "trail index keyed by session, kind and seq: a trail reads each kind as one range",
    15: "failed replies by the claim they were owed under: a sweep counts one reply's",
    16: "calls outside a turn by id, and replies awaiting an approval: approvals and a "
        "delivery sweep read what they concern",
    17: "roles: the writer appends; the owner's triggers and functions write the rest "
        "(PostgreSQL; SQLite has no roles)",
    18: "memory search finds text inside words: an index of trigrams (SQLite: FTS5 "
        "trigram; PostgreSQL: pg_trgm)",
    19: "memory provenance: each memory row names its session, tool call and origin, "
        "as its entry does",
    20: "turns by cost and by duration: a page of the dearest or slowest turns is one range",
}


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


def apply_pending(conn: Any, migrations: Sequence[tuple[int, str, str]],
                  fills: Mapping[int, Callable[[Any], None]], *, ph: str,
                  transaction: Callable[[], AbstractContextManager[Any]],
                  run: Callable[[str], None]) -> list[int]:
    """Apply on ``conn`` each of ``migrations`` not recorded yet, each in a
    ``transaction()`` of its own, after reading again what is recorded (so processes
    migrating at once each apply a migration once): its script by ``run``, then its
    Python step in ``fills``, then its row in ``overt_migrations``. The versions
    applied (``ph``: the placeholder)."""
    applied: list[int] = []
    for version, name, script in migrations:
        with transaction():
            if conn.execute(f"SELECT 1 FROM overt_migrations WHERE version = {ph}",
                            (version,)).fetchone():
                continue
            run(script)
            fill = fills.get(version)
            if fill is not None:
                fill(conn)
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
"""The views of one kind's entries (migration 1): each field, and its PostgreSQL type
(``None``: text; SQLite's ``json_extract`` gives each value its JSON type)."""


def _typed(d: Dialect, field: str, sql_type: str | None, column: str = "data") -> str:
    value = d.text(field, column)
    return f"({value})::{sql_type}" if sql_type and d.name != "sqlite" else value


def views(d: Dialect) -> str:
    """The views of migration 1, for SQL users: ``turns`` (a turn's start and its
    completion), ``inferences`` and ``tool_calls``."""
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
        for name, (kind, fields) in _VIEW_FIELDS.items())


def same_on_both(d: Dialect) -> dict[int, str]:
    """The migrations whose statements are the same on both backends, spelled in ``d``."""
    return {
        2: (f"\nDROP INDEX audit_log_failures;\nCREATE INDEX audit_log_failures ON audit_log "
            f"(seq) WHERE {failure_condition(d)};\n"),
        3: claims_index(d) + ";\n",
        4: reasoning_phase_index(d) + ";\n" + reasoning_steps_view(d) + ";\n",
        6: appending_indexes(d),  # indexes a commit appends to, not a page per kind
        15: reply_failures_index(d) + ";\n",
        16: f"{direct_calls_index(d)};\n{paused_replies_index(d)};\n",
        20: turn_order_indexes(d),
    }


def chain_table(d: Dialect) -> str:
    """The chain's table and its first indexes (migration 1)."""
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
CREATE INDEX audit_log_kind_at ON audit_log (kind, at);
CREATE INDEX audit_log_failures ON audit_log (seq) WHERE {failure_condition(d, 1)};
"""


def merkle_table(d: Dialect) -> str:
    """The Merkle tree's stored subtrees (migration 12, :mod:`overt.ledger.tree`):
    written when a checkpoint is made and when a prune removes leaves, never on a
    turn's path; never pruned."""
    leaf = "INTEGER" if d.name == "sqlite" else "BIGINT"
    return f"""
CREATE TABLE merkle_nodes (
    level      INTEGER NOT NULL,
    first_leaf {leaf} NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX merkle_nodes_at ON merkle_nodes (level, first_leaf);
"""
