"""The trail index: each trail entry's fields, projected once, for reading a whole
session's trail at once.

A trail (see :mod:`overt.reasoning.trail`) reads every step, tool call, policy
decision and approval of the turns in scope, 80,000 entries for a session of
10,000 turns. Read from the chain, each entry's JSON must be searched for its
body's digest in SQL and decoded whole in Python, and the body found by a range
search: about half a second. The index holds, for each such entry, only what
the trail reads, as a compact record, clustered by session, and the exact
key of its body in ``content_blobs``; a session's trail is then one range scan
with one key look-up per body.

It is derived, never a source of truth: written from the chain's entries in the
transaction that stores them (the SQLite backend's :func:`~overt.ledger.feeder.store`),
filled from the chain by the migration that created it, and checked against the
chain by ``verify``, so an index altered behind the ledger's back is reported,
not believed. It is in the audit tier: identifiers, digests and statuses only,
never a body.

A record is the tuple ``(kind, turn_id, session_id, at, *fields)``, the fields
being :data:`TRAIL_FIELDS` of its kind, in that order (``None`` where the entry
has none), stored in :mod:`marshal`'s format 4 (the format of Python 3.4 on,
read by every later one). Not JSON: decoding 80,000 records, and the garbage
collector's pass over the trail built from them, cost 45 ms more from JSON
arrays (see benchmarks/README.md). Being derived, the index can always be
written again from the chain.
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Iterable, Sequence
from json.scanner import make_scanner
from typing import Any, cast

from overt.errors import LedgerError

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
"""The entry kinds a trail reads, and the fields of each its record keeps."""

TRAIL_KINDS = tuple(TRAIL_FIELDS)

BODY_FIELDS = {"reasoning.step": "content_digest", "turn.started": "message_digest"}
"""The kinds whose body the trail shows (a step's text, a turn's message), and the
field naming its digest."""

MARSHAL_VERSION = 4

IndexRow = tuple[str, int, int | None, bytes]
"""(session_id or ``""``, seq, body key or ``None``, record), as inserted."""

# Entry data is canonical JSON the ledger wrote: the decoder's C scanner reads it
# without json.loads' wrappers (see overt.reasoning.trail).
_scan = make_scanner(cast(Any, json.JSONDecoder()))


def fields(kind: str, turn_id: str, session_id: str | None, at: str,
           data: dict[str, Any]) -> tuple[Any, ...]:
    """What the index keeps of one entry of a trail kind."""
    return (kind, turn_id, session_id, at, *[data.get(f) for f in TRAIL_FIELDS[kind]])


def record(kind: str, turn_id: str, session_id: str | None, at: str,
           data: dict[str, Any]) -> bytes:
    """The index record of one entry of a trail kind, as stored."""
    return marshal.dumps(fields(kind, turn_id, session_id, at, data), MARSHAL_VERSION)


def read(blob: bytes) -> tuple[Any, ...] | None:
    """A stored record; ``None`` if it is not one (written by hand)."""
    try:
        value = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return None
    return value if isinstance(value, tuple) else None


def decode(data_json: str, seq: int | None = None) -> dict[str, Any]:
    """An entry's data, from the canonical JSON the ledger wrote.

    Raises:
        LedgerError: it is not a JSON object (written by hand), naming entry ``seq``.
    """
    try:
        value = _scan(data_json, 0)[0]
    except (StopIteration, TypeError, ValueError):
        value = None
    if isinstance(value, dict):
        return value
    try:
        json.loads(data_json)  # the decoder's own words for what is wrong
    except (TypeError, ValueError) as exc:
        raise LedgerError(f"entry {seq}'s data is not JSON: {exc}") from exc
    raise LedgerError(f"entry {seq}'s data is not a JSON object")


def index_rows(entries: Iterable[Sequence[Any]],
               contents: Iterable[Sequence[Any]] | None) -> list[IndexRow]:
    """The index rows of a batch: ``entries`` as stored (seq, id, kind, at, turn_id,
    session_id, data, prev_hash, hash), ``contents`` the bodies stored with them
    (key, seq, digest, body, created_at), whose keys the rows point at."""
    rows: list[IndexRow] = []
    keys: dict[str, int] | None = None  # digest -> key, once a body is looked for
    for seq, _id, kind, at, turn_id, session_id, data_json, *_ in entries:
        if kind not in TRAIL_FIELDS or turn_id is None:
            continue
        data = decode(data_json, seq)
        body = BODY_FIELDS.get(kind)
        digest = data.get(body) if body is not None else None
        key = None
        if digest and contents:
            if keys is None:
                keys = {c[2]: c[0] for c in contents}
            key = keys.get(digest)
        rows.append(index_row(seq, kind, at, turn_id, session_id, data, key))
    return rows


def index_row(seq: int, kind: str, at: str, turn_id: str, session_id: str | None,
              data: dict[str, Any], body_key: int | None) -> IndexRow:
    """One entry's index row, as inserted (a session of none keyed ``""``)."""
    return session_id or "", seq, body_key, record(kind, turn_id, session_id, at, data)


def check(rows: Iterable[Sequence[Any]], held: int) -> tuple[int | None, str] | None:
    """What is wrong with the index, if anything: ``(seq, problem)`` for the first
    entry it does not match, ``(None, problem)`` for rows no entry accounts for.

    ``rows``: each entry the index should hold, in ``seq`` order, as (seq, kind,
    at, turn_id, session_id, data, the index's record, its body key, the digest
    of the body under that key, whether the index holds a row for it); ``held``:
    the rows the index holds. A body key with no body under it is a body pruned
    (the trail shows none); one under which another body is stored is wrong.
    """
    present = 0
    for seq, kind, at, turn_id, session_id, data_json, blob, key, digest, found in rows:
        if not found:
            return seq, f"the trail index lacks entry {seq}"
        present += 1
        try:
            data = decode(data_json, seq)
        except LedgerError as exc:
            return seq, str(exc)
        if read(blob) != fields(kind, turn_id, session_id, at, data):
            return seq, f"the trail index's record of entry {seq} does not match the entry"
        body = BODY_FIELDS.get(kind)
        if key is not None and digest is not None and (
                body is None or digest != data.get(body)):
            return seq, f"the trail index points entry {seq} at another entry's body"
    if held != present:
        return None, (f"the trail index holds {held - present} rows no entry accounts for")
    return None
