"""Sessions as the record shows them: each one's summary (its turns, when it started
and was last active, its first turn's ``turn.started``), listed and searched, and
counts of entries within a set of sessions. A session has no table of its own: the
ledger is the only store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from overt.events import TurnStarted, from_entry
from overt.ledger.chain import entry_data
from overt.ledger.reads.base import selecting
from overt.ledger.reads.conversations import body_near
from overt.ledger.reads.filters import given
from overt.ledger.sql import Dialect, chunks, of_kinds


class SessionSummary(NamedTuple):
    """One session: how many turns it holds, when it started and was last active, and
    its first turn's start (entry ``first_seq``), which names its source, its owner
    (the actor) and its title (the first message's digest)."""

    session_id: str
    turns: int
    started_at: str
    last_at: str
    first_seq: int
    first: TurnStarted


SEARCHED_KINDS = ("turn.started", "turn.completed")
"""The entries whose bodies a text search reads: each turn's message and its answer."""


def _summaries(d: Dialect, where: str) -> str:
    """(session_id, turns, started_at, last_at, first_seq, first_data) per session."""
    return ("SELECT g.session_id, g.turns, g.started_at, g.last_at, f.seq, f.data FROM ("
            "SELECT session_id, sum(CASE WHEN kind = 'turn.started' THEN 1 ELSE 0 END) "
            "AS turns, min(seq) AS first_seq, min(at) AS started_at, max(at) AS last_at "
            "FROM audit_log WHERE kind IN ('turn.started', 'turn.completed') "
            f"AND session_id IS NOT NULL {where} GROUP BY session_id) g "
            "JOIN audit_log f ON f.seq = g.first_seq AND f.kind = 'turn.started'")


def _summary(row: Sequence[Any]) -> SessionSummary:
    """A row of :func:`_summaries`, its first turn decoded.

    Raises:
        LedgerIntegrityError: the first entry's data is not a JSON object.
        EventDecodeError: it lacks a field ``turn.started`` has.
    """
    first = from_entry(TurnStarted.kind, entry_data(row[5], row[4]), session_id=row[0],
                       expect=TurnStarted)
    return SessionSummary(row[0], int(row[1]), row[2], row[3], int(row[4]), first)


def _contains(d: Dialect, body: str) -> str:
    """Whether the body the SQL expression ``body`` holds contains the next parameter,
    ignoring case (ASCII letters on SQLite, whose ``lower`` folds no others). The
    body is read by the database: nothing is brought into Python to be searched."""
    if d.name == "sqlite":
        return f"instr(lower({body}), lower({d.ph})) > 0"
    return (f"(SELECT strpos(lower({_pg_text('x.b')}), lower({d.ph})) > 0 "
            f"FROM (SELECT {body} AS b) x)")


_NUL_FREE = (r"decode(regexp_replace(encode({b}, 'escape'), '(\\\\)|\\000', '\1', 'g'), "
             r"'escape')")
r"""The bytea ``{b}`` without its NUL bytes: ``encode(.., 'escape')`` writes a NUL as
``\000`` and a backslash as ``\\``; the pattern keeps each ``\\`` and drops each
``\000`` escape, and ``decode`` turns the rest back into the same bytes."""


def _pg_text(b: str) -> str:
    """A PostgreSQL body (bytea) as text to search. Text cannot hold NUL, and one
    body holding it (a message, a tool's result) made ``convert_from`` fail every
    search that reached it: its NUL bytes are left out of what is searched."""
    return (f"convert_from(CASE WHEN position('\\x00'::bytea IN {b}) = 0 THEN {b} "
            f"ELSE {_NUL_FREE.format(b=b)} END, 'UTF8')")


def _says(d: Dialect, session: str) -> str:
    """Whether a message or an answer of the session the SQL expression ``session``
    names contains the next parameter (see :func:`_contains`)."""
    digest = (f"CASE a.kind WHEN 'turn.started' THEN {d.text('message_digest', 'a.data')} "
              f"ELSE {d.text('reply_digest', 'a.data')} END")
    kinds = ", ".join(f"'{k}'" for k in SEARCHED_KINDS)
    return (f"EXISTS (SELECT 1 FROM audit_log a WHERE a.session_id = {session} "
            f"AND a.kind IN ({kinds}) AND {_contains(d, body_near(d, digest))})")


async def session_summary(ledger: object, session_id: str) -> SessionSummary | None:
    """The summary of ``session_id``, or ``None`` when no turn was recorded under it.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or the first entry is malformed.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(_summaries(d, f"AND session_id = {d.ph}"), (session_id,))
    return _summary(rows[0]) if rows else None


async def session_opening(ledger: object, session_id: str) -> TurnStarted | None:
    """The ``turn.started`` that opens ``session_id``: its first ``turn.started`` or
    ``turn.completed`` entry, when that is a start (``None`` when the session holds
    neither, or a prune removed its first turn's start). One entry read, through the
    session's index, however long the session is.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or the entry is malformed.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(
        "SELECT seq, kind, data FROM audit_log WHERE session_id = "
        f"{d.ph} AND kind IN ('turn.started', 'turn.completed') ORDER BY seq LIMIT 1",
        (session_id,))
    if not rows or rows[0][1] != TurnStarted.kind:
        return None
    seq, _, data = rows[0]
    return from_entry(TurnStarted.kind, entry_data(data, seq), session_id=session_id,
                      expect=TurnStarted)


async def session_summaries(ledger: object, *, owner: str | None = None,
                            source: str | None = None, since: str | None = None,
                            until: str | None = None, text: str | None = None,
                            limit: int = 50) -> list[SessionSummary]:
    """Summaries, the most recently active first, at most ``limit``; when given, only
    ``owner``'s (its first turn's actor's), ``source``'s, those active at or after
    ``since``, those started before ``until``, and those with a message or an answer
    containing ``text`` (case aside; the bodies are searched by the database in the
    content tier). No value may hold NUL.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or a first entry is malformed.
    """
    reader, d = selecting(ledger)
    filters, params = given((f"{d.text('actor', 'f.data')} = {d.ph}", owner),
                            (f"{d.text('source', 'f.data')} = {d.ph}", source),
                            (f"g.last_at >= {d.ph}", since),
                            (f"g.started_at < {d.ph}", until),
                            (_says(d, "g.session_id"), text))
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    rows = await reader.select(f"SELECT x.* FROM ({_summaries(d, '')}{where}) x "
                               f"ORDER BY x.last_at DESC, x.session_id DESC LIMIT {d.ph}",
                               (*params, int(limit)))
    return [_summary(row) for row in rows]


async def count_in_sessions(ledger: object, kind: str, session_ids: Sequence[str], *,
                            since: str | None = None) -> int:
    """Entries of ``kind`` at or after ``since`` in any of ``session_ids``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    total = 0
    for ids in chunks(sorted(session_ids)):
        rows = await reader.select(
            f"SELECT count(*) FROM audit_log WHERE {of_kinds(d, [kind])} "
            f"AND at >= {d.ph} AND session_id IN ({d.phs(len(ids))})",
            (kind, since or "", *ids))
        total += int(rows[0][0])
    return total


async def first_starts(ledger: object, session_ids: Sequence[str]) -> dict[str, int]:
    """The seq of each session's first ``turn.started`` (a session with none is left
    out).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    if not session_ids:
        return {}
    reader, d = selecting(ledger)
    rows = await reader.select(
        "SELECT session_id, min(seq) FROM audit_log WHERE kind = 'turn.started' AND "
        f"session_id IN ({d.phs(len(session_ids))}) GROUP BY session_id", tuple(session_ids))
    return {session: int(seq) for session, seq in rows}
