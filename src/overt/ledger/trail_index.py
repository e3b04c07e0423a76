"""The trail index: each trail entry's fields in plain columns, for reading a whole
session's trail at once, the same table on SQLite and PostgreSQL.

A trail (see :mod:`overt.reasoning.trail`) reads every step, tool call, policy
decision and approval of the turns in scope, 80,000 entries for a session of
10,000 turns. Read from the chain, each entry's JSON must be searched for its
body's digest in SQL and decoded whole in Python. The index holds, for each such
entry, only the fields the trail reads, one typed column each (``NULL`` where
its kind has none), clustered by session and kind (:data:`KEY`), with the
digest of the body it shows and the ``seq`` the body is stored under in
``content_blobs``; a session's trail is then one range per kind
(:mod:`overt.ledger.trail_read`), readable by ``sqlite3`` or ``psql`` as any
table is.

It is derived, never a source of truth: written from the chain's entries in the
transaction that stores them (SQLite: by its writer, :func:`inserts`; PostgreSQL: by
the owner's trigger on ``audit_log``, :func:`overt.ledger.sql.trail_index_derive`,
so the writer role has no ``INSERT`` on it), pruned with the chain, guarded
append-only like the other tables, and checked against the chain by ``verify``
(:func:`check`), so an index altered behind the ledger's back is reported, not
believed. It is in the audit tier: identifiers, digests and statuses only,
never a body.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from overt.errors import LedgerError
from overt.ledger.base import Entry, VerifyReport
from overt.ledger.canonical import canonical_json
from overt.ledger.chain import entry_data

TRAIL_FIELDS: dict[str, tuple[str, ...]] = {
    "turn.started": ("source", "model"),
    "turn.completed": ("status",),
    "turn.paused": ("request_id",),
    "turn.resumed": (),
    "reasoning.step": ("step_id", "step_number", "phase", "content_digest", "tool_call_id",
                       "policy_decision_id", "approval_request_id"),
    "tool_call.completed": ("tool_call_id", "tool_name", "tool_status", "tool_duration_ms",
                            "reason_code", "exc_type"),
    "policy.decision": ("decision_id", "tool_call_id", "tool_name", "effect", "reason_code",
                        "message", "rule"),
    "approval.requested": ("request_id", "tool_call_id", "tool_name", "mode", "reason_code"),
    "approval.decided": ("request_id", "decision", "decided_by"),
}
"""The entry kinds a trail reads, and the fields of each the index keeps."""

TRAIL_KINDS = tuple(TRAIL_FIELDS)

BODY_FIELDS = {"reasoning.step": "content_digest", "turn.started": "message_digest"}
"""The kinds whose body the trail shows (a step's text, a turn's message), and the
field naming its digest (kept in the ``body_digest`` column)."""

INTEGER_FIELDS = frozenset({"step_number"})
REAL_FIELDS = frozenset({"tool_duration_ms"})

FIELD_COLUMNS: tuple[str, ...] = tuple(dict.fromkeys(
    f for fields in TRAIL_FIELDS.values() for f in fields if f != "content_digest"))
"""One column per field the trail reads (a step's ``content_digest`` is ``body_digest``)."""

KEY_COLUMNS = ("session_id", "seq", "turn_id", "kind", "at", "body_digest", "body_seq")
COLUMNS = KEY_COLUMNS + FIELD_COLUMNS
"""The table's columns, in the order an :data:`IndexRow` holds them."""

IndexRow = tuple[Any, ...]
"""One row as inserted: values of :data:`COLUMNS` (a session of none is ``""``)."""

_PICK = {kind: tuple(f if f in fields else None for f in FIELD_COLUMNS)
         for kind, fields in TRAIL_FIELDS.items()}


KEY = ("session_id", "kind", "seq")
"""The table's primary key: each kind's rows of a session are one range, in ``seq``
order, so a trail reads each of its three groups (:mod:`overt.ledger.trail_read`)
without passing over the others' rows."""


def table_sql(*, postgres: bool) -> str:
    """``CREATE TABLE`` of the trail index, typed for the backend, keyed by :data:`KEY`."""
    integer = "BIGINT" if postgres else "INTEGER"
    real = "DOUBLE PRECISION" if postgres else "REAL"
    fields = "".join(
        f",\n    {c} {integer if c in INTEGER_FIELDS else real if c in REAL_FIELDS else 'TEXT'}"
        for c in FIELD_COLUMNS)
    return ("CREATE TABLE trail_index (\n    session_id TEXT NOT NULL,\n"
            f"    seq {integer} NOT NULL,\n    turn_id TEXT NOT NULL,\n    kind TEXT NOT NULL,\n"
            f"    at TEXT NOT NULL,\n    body_digest TEXT,\n    body_seq {integer}{fields},\n"
            f"    PRIMARY KEY ({', '.join(KEY)})\n){'' if postgres else ' WITHOUT ROWID'};\n")


def _value(field: str, value: Any) -> Any:
    """A field as its column holds it: numbers in the number columns, text elsewhere."""
    if field in INTEGER_FIELDS:
        return value if value.__class__ is int else None
    if field in REAL_FIELDS:
        return float(value) if value.__class__ in (int, float) else None
    if value is None or value.__class__ is str:
        return value
    return canonical_json(value)


def index_row(seq: int, kind: str, at: str, turn_id: str, session_id: str | None,
              data: dict[str, Any], body_seq: int | None) -> IndexRow:
    """One entry's index row, as inserted."""
    body = BODY_FIELDS.get(kind)
    digest = data.get(body) if body is not None else None
    return (session_id or "", seq, turn_id, kind, at,
            digest if digest.__class__ is str else None, body_seq,
            *[None if f is None else _value(f, data.get(f)) for f in _PICK[kind]])


def index_rows(entries: Iterable[Entry], body_seqs: dict[str, int]) -> list[IndexRow]:
    """The index rows of a batch: its entries, and the seq each body stored with
    them is under."""
    rows: list[IndexRow] = []
    for e in entries:
        if e.kind not in TRAIL_FIELDS or e.turn_id is None:
            continue
        body = BODY_FIELDS.get(e.kind)
        digest = e.data.get(body) if body is not None else None
        rows.append(index_row(e.seq, e.kind, e.at, e.turn_id, e.session_id, e.data,
                              body_seqs.get(digest) if digest.__class__ is str else None))
    return rows


KIND_COLUMNS: dict[str, tuple[str, ...]] = {
    kind: tuple(f for f in fields if f != "content_digest")
    for kind, fields in TRAIL_FIELDS.items()}
"""The field columns of each kind (the rest of its row is ``NULL``)."""


def inserts(entries: Iterable[Entry], body_seqs: dict[str, int],
            ph: str) -> list[tuple[str, list[IndexRow]]]:
    """The index rows of a batch (as :func:`index_rows`) as ``INSERT`` statements
    naming only each kind's columns, with their rows (``ph``: the placeholder).

    The same rows are stored; but a statement binding all of :data:`COLUMNS`, most
    of them ``NULL``, costs SQLite several times as much per row.
    """
    by_kind: dict[str, list[IndexRow]] = {}
    for e in entries:
        fields = KIND_COLUMNS.get(e.kind)
        if fields is None or e.turn_id is None:
            continue
        body = BODY_FIELDS.get(e.kind)
        digest = e.data.get(body) if body is not None else None
        if digest.__class__ is not str:
            digest = None
        data = e.data
        row = (e.session_id or "", e.seq, e.turn_id, e.kind, e.at, digest,
               body_seqs.get(digest) if digest is not None else None,
               *[_value(f, data.get(f)) for f in fields])
        rows = by_kind.get(e.kind)
        if rows is None:
            by_kind[e.kind] = [row]
        else:
            rows.append(row)
    return [(_insert(kind, ph), rows) for kind, rows in by_kind.items()]


@functools.cache
def _insert(kind: str, ph: str) -> str:
    columns = KEY_COLUMNS + KIND_COLUMNS[kind]
    return (f"INSERT INTO trail_index ({', '.join(columns)}) "
            f"VALUES ({', '.join([ph] * len(columns))})")


def check(rows: Iterable[Sequence[Any]], held: int,
          pruned_through: int) -> tuple[int | None, str] | None:
    """What is wrong with the index, if anything: ``(seq, problem)`` for the first
    entry it does not match, ``(None, problem)`` for rows no entry accounts for.

    ``rows``: each entry the index should hold, in ``seq`` order, as (seq, kind,
    at, turn_id, session_id, data JSON, the seq its body is found under in the
    content tier or ``None``, then the index's row for it in :data:`COLUMNS`
    order, all ``None`` when it has none); ``held``: the rows the index holds;
    ``pruned_through``: the last seq a recorded prune removed. The index must say
    what the entry says, and show the body the entry names where it is stored (a
    body pointed to and gone is accounted for only by a prune).
    """
    present = 0
    width = len(COLUMNS)
    for seq, kind, at, turn_id, session_id, data_json, found_seq, *indexed in rows:
        if indexed[1] is None:
            return seq, f"the trail index lacks entry {seq}"
        present += 1
        try:
            data = entry_data(data_json, seq)
        except LedgerError as exc:
            return seq, str(exc)
        body_seq = indexed[6]
        expected = index_row(seq, kind, at, turn_id, session_id, data, body_seq)
        if tuple(indexed[:width]) != expected:
            return seq, f"the trail index's row of entry {seq} does not match the entry"
        if body_seq != found_seq and not (found_seq is None and body_seq is not None
                                          and body_seq <= pruned_through):
            return seq, f"the trail index points entry {seq} at another body than its own"
    if held != present:
        return None, f"the trail index holds {held - present} rows no entry accounts for"
    return None


def verified(report: VerifyReport, conn: Any, check_statement: str,
             anchors: Mapping[int, str],
             counted: Callable[[Iterable[Any]], Iterable[Any]] | None = None) -> VerifyReport:
    """``report``, failed if the index does not match the chain, read on ``conn``
    (either backend's) by ``check_statement`` (:func:`overt.ledger.sql.trail_index_check`);
    ``counted`` wraps the rows read (to count them, :class:`overt.ledger.chain.Counted`)."""
    held = conn.execute("SELECT count(*) FROM trail_index").fetchone()[0]
    rows = conn.execute(check_statement)
    found = check(counted(rows) if counted is not None else rows, int(held),
                  max(anchors, default=0))
    if found is None:
        return report
    seq, problem = found
    return dataclasses.replace(report, ok=False, bad_seq=seq, problem=problem, index_bad=True)
