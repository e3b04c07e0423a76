"""Reading a trail from the trail index: three queries, each row holding only the
fields its kind has.

A trail of 10,000 turns is 80,000 rows, and the database driver's cost is per
value handed to Python (``NULL`` or not), so a row of every
kind's columns, most of them ``NULL``, costs more than rows of their own kind's
fields. The index is keyed by (session, kind, seq), so each read below is one
range per kind, in ``seq`` order. The kinds are read in three groups, in one
snapshot (reading the events kind by kind, with exactly each kind's columns,
costs the same, for a statement and a loop more per kind):

- **turns** (``turn.started``), with the message body: :data:`TURN_COLUMNS`;
- **steps** (``reasoning.step``, five of every eight rows), with the step's
  text: :data:`STEP_COLUMNS`, exactly a step's fields;
- **events**, every other kind (tool calls, completions, the approval path),
  no body: :data:`EVENT_COLUMNS`, a kind's text fields in shared slots.

Each group comes in ``seq`` order; :func:`overt.reasoning.trail.assemble` joins
them into turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from overt.ledger.base import TrailRows
from overt.ledger.chain import body_text
from overt.ledger.sql import Dialect, content_seq, kind_indexed
from overt.ledger.trail_index import INTEGER_FIELDS, REAL_FIELDS, TRAIL_FIELDS

TURN_COLUMNS = ("seq", "turn_id", "session_id", "at", "source", "model", "body")
"""A turn's row (its ``turn.started`` entry; ``body``: the message)."""

STEP_COLUMNS = ("turn_id", "seq", "at", "step_id", "step_number", "phase", "body",
                "body_digest", "tool_call_id", "policy_decision_id", "approval_request_id")
"""A step's row: its turn, then the fields of a
:class:`~overt.reasoning.trail.Step` in order (``body``: its text)."""

EVENT_KINDS = tuple(k for k in TRAIL_FIELDS if k not in ("turn.started", "reasoning.step"))
GROUP_KINDS: dict[str, tuple[str, ...]] = {
    "turns": ("turn.started",), "steps": ("reasoning.step",), "events": EVENT_KINDS}

EVENT_TEXT: dict[str, tuple[str, ...]] = {
    kind: tuple(f for f in TRAIL_FIELDS[kind] if f not in INTEGER_FIELDS | REAL_FIELDS)
    for kind in EVENT_KINDS}
"""The text fields of each event kind, in the order its row's slots hold them."""

EVENT_SLOTS = max(len(fields) for fields in EVENT_TEXT.values())

EVENT_COLUMNS = ("turn_id", "kind", "seq", "at", "tool_duration_ms",
                 *[f"slot{n}" for n in range(EVENT_SLOTS)])
"""An event's row: ``slotN`` holds the ``N``-th of its kind's :data:`EVENT_TEXT`
(``NULL`` past them)."""

EVENT_POSITION: dict[str, dict[str, int]] = {
    kind: {"tool_duration_ms": EVENT_COLUMNS.index("tool_duration_ms"),
           **{f: EVENT_COLUMNS.index(f"slot{i}") for i, f in enumerate(fields)}}
    for kind, fields in EVENT_TEXT.items()}
"""Where each field of each event kind is in its row."""


def _column(d: Dialect, name: str) -> str:
    if name == "body":
        if d.name == "sqlite":
            return "c.body"
        # a body is bytea (text cannot hold NUL), read as bytes and decoded by the
        # trail's cursor (:meth:`overt.ledger.postgres.PostgresBackend.snapshot`):
        # ``convert_from`` here failed the whole trail on a body holding NUL. One
        # look-up per row: with statistics, a join is planned as a hash of the whole
        # content tier, for one session's steps. ``LIMIT 1`` (the key is unique: the
        # same row) has the look-up planned as an index scan when the table has no
        # statistics yet; without it, a bitmap scan per row
        return ("(SELECT c.body FROM content_blobs c "
                "WHERE c.seq = t.body_seq AND c.digest = t.body_digest LIMIT 1)")
    if name.startswith("slot"):
        n = int(name[4:])
        branches = " ".join(f"WHEN '{kind}' THEN t.{fields[n]}"
                            for kind, fields in EVENT_TEXT.items() if len(fields) > n)
        return f"CASE t.kind {branches} END"
    return f"t.{name}"


def _scope(d: Dialect, *, turn_id: str | None, session_id: str | None,
           since: str | None, until: str | None) -> tuple[str, list[Any]]:
    """The condition on entries ``a`` of the turns in scope, and its parameters."""
    if turn_id is not None:
        return f"a.turn_id = {d.ph}", [turn_id]
    params: list[Any] = []
    started = ["s.kind = 'turn.started'", kind_indexed("s")]
    for condition, value in ((f"s.session_id = {d.ph}", session_id),
                             (f"s.at >= {d.ph}", since), (f"s.at < {d.ph}", until)):
        if value is not None:
            started.append(condition)
            params.append(value)
    return (f"a.turn_id IN (SELECT s.turn_id FROM audit_log s WHERE {' AND '.join(started)})",
            params)


def statements(d: Dialect, *, turn_id: str | None, session_id: str | None,
               since: str | None, until: str | None) -> list[tuple[str, list[Any]]]:
    """The three reads of a trail (turns, steps, events: :class:`TrailRows`'s
    order), each ``(statement, parameters)``.

    In scope: the one turn ``turn_id``; else the turns of ``session_id`` and/or
    started in ``[since, until)``. A session's rows are one range of the index;
    other scopes find their turns through the chain's indexes first.
    """
    join = (f"LEFT JOIN content_blobs c ON {content_seq(d, '=', 't.body_seq', 'c')} "
            "AND c.digest = t.body_digest")
    session = turn_id is None and since is None and until is None
    if session:
        source, order, params = "trail_index t", "t.seq", [session_id or ""]
        scope = f"t.session_id = {d.ph}"
    else:
        source = ("audit_log a JOIN trail_index t ON t.session_id = "
                  "coalesce(a.session_id, '') AND t.kind = a.kind AND t.seq = a.seq")
        order = "a.seq"
        scope, params = _scope(d, turn_id=turn_id, session_id=session_id, since=since,
                               until=until)
    reads = []
    for group, columns in (("turns", TURN_COLUMNS), ("steps", STEP_COLUMNS),
                           ("events", EVENT_COLUMNS)):
        kinds = ", ".join(f"'{k}'" for k in GROUP_KINDS[group])
        body = join if "body" in columns and d.name == "sqlite" else ""
        reads.append((f"SELECT {', '.join(_column(d, c) for c in columns)} FROM {source} {body} "
                      f"WHERE {scope} AND t.kind IN ({kinds}) ORDER BY {order}", params))
    return reads


def read(cur: Any, reads: Sequence[tuple[str, Sequence[Any]]]) -> TrailRows:
    """The rows of ``reads`` on ``cur``, inside one read-only snapshot
    (:meth:`overt.ledger.sql_ledger.Backend.snapshot`), so the three see one state."""
    turns, steps, events = (cur.execute(s, p).fetchall() for s, p in reads)
    return TrailRows(_texts(turns, TURN_COLUMNS), _texts(steps, STEP_COLUMNS), events)


def _texts(rows: list[Any], columns: Sequence[str]) -> list[Any]:
    """``rows`` with their body as text: a body stored as bytes (never by overt, on
    SQLite) is decoded or refused (:func:`~overt.ledger.chain.body_text`)."""
    at = columns.index("body")
    return [row if isinstance(row[at], str | None) else
            (*row[:at], body_text(row[at]), *row[at + 1:]) for row in rows]


def row_of(values: dict[str, Any], body: str | None) -> tuple[str, tuple[Any, ...]]:
    """The group and read row of an index row given as ``{column: value}`` (the
    table's columns, :data:`~overt.ledger.trail_index.COLUMNS`) and its body: what
    :func:`statements` reads for it."""
    values = {**values, "body": body}
    kind = values["kind"]
    if kind == "turn.started":
        return "turns", tuple(values[c] for c in TURN_COLUMNS)
    if kind == "reasoning.step":
        return "steps", tuple(values[c] for c in STEP_COLUMNS)
    fields = EVENT_TEXT[kind]
    return "events", (*[values[c] for c in EVENT_COLUMNS[:5]],
                      *[values[fields[n]] if n < len(fields) else None
                        for n in range(EVENT_SLOTS)])
