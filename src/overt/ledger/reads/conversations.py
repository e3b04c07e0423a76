"""A session's conversation entries, with the bodies they name, read in one statement:
each turn's message, its tool calls with their arguments and results, the approval a
paused turn waits for and its decision, and the turn's answer. The fields are read by
the database, so the reader parses no entry's JSON (it checks each body against its
digest: :mod:`overt.sessions.book`)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from overt.ledger.reads.base import selecting
from overt.ledger.sql import BODY_WINDOW, Dialect, content_order, content_seq

CONVERSATION_KINDS = ("turn.started", "tool_call.completed", "turn.paused",
                      "approval.decided", "turn.completed")
"""The entries a conversation is rebuilt from: each turn's message, its tool calls
with their results, its answer, and (until it has one) the approval it waits for."""

Body = str | bytes | None
"""A content body as a backend stores it (text, or UTF-8 bytes; ``None``: pruned or
never stored), read as text by :func:`overt.ledger.chain.body_text`."""


class ConversationEntry(NamedTuple):
    """One conversation entry of a session.

    ``status`` is a turn's or a tool call's, the approval request a paused turn
    waits for (``turn.paused``), or an approval's decision (``approval.decided``,
    whose ``tool_call_id`` and ``tool_name`` name the held call, as a pause's do);
    ``body`` the message (``turn.started``), the result (``tool_call.completed``) or
    the answer (``turn.completed``); ``args_body`` a tool call's arguments;
    ``digest`` and ``args_digest`` what the entry says they hash to (the reader
    checks them)."""

    seq: int
    kind: str
    turn_id: str | None
    status: str | None
    tool_call_id: str | None
    tool_name: str | None
    body: Body
    args_body: Body
    digest: str | None
    args_digest: str | None


def body_near(d: Dialect, digest: str) -> str:
    """The body the SQL expression ``digest`` names, stored with entry ``a`` or with an
    earlier entry of its commit naming the same digest (:func:`overt.ledger.sql.body_of`).
    The search goes back at most :data:`~overt.ledger.sql.BODY_WINDOW` entries, so a
    body that is not there costs a bounded walk."""
    return (f"coalesce((SELECT c.body FROM content_blobs c "
            f"WHERE {content_seq(d, '=', 'a.seq', 'c')} AND c.digest = {digest}), "
            f"(SELECT c.body FROM content_blobs c WHERE {content_seq(d, '<', 'a.seq', 'c')} "
            f"AND {content_seq(d, '>', f'a.seq - {BODY_WINDOW}', 'c')} AND c.digest = {digest} "
            f"ORDER BY {content_order(d, 'c')} DESC LIMIT 1))")


def args_near(d: Dialect, call_id: str, digest: str) -> str:
    """The arguments (the body the SQL expression ``digest`` names) of the call
    ``call_id`` that entry ``a``, its ``tool_call.completed``, ended.

    A call that ran stored its arguments in the commit of its ``tool_call.started``
    (keyed at the first entry of that commit naming them, its ``policy.decision``),
    and whatever other sessions wrote while it ran lies between that commit and its
    completion's, however much that was. So they are looked for back from the turn's
    latest ``tool_call.started`` of the call, found through ``audit_log_turn``
    walking back from ``a``, within :data:`~overt.ledger.sql.BODY_WINDOW` entries
    of it. A call refused before it started stored them in its completion's commit:
    :func:`body_near` ``a``."""
    started = (f"SELECT (SELECT c.body FROM content_blobs c "
               f"WHERE {content_seq(d, '<=', 's.seq', 'c')} "
               f"AND {content_seq(d, '>', f's.seq - {BODY_WINDOW}', 'c')} "
               f"AND c.digest = {digest} ORDER BY {content_order(d, 'c')} DESC LIMIT 1) "
               f"FROM audit_log s WHERE s.turn_id = a.turn_id AND s.seq < a.seq "
               f"AND s.kind = 'tool_call.started' "
               f"AND {d.text('tool_call_id', 's.data')} = {call_id} "
               f"ORDER BY s.seq DESC LIMIT 1")
    return f"coalesce(({started}), {body_near(d, digest)})"


@functools.cache  # a few statements per dialect, read on every turn: built once each
def _conversation(d: Dialect, where: str) -> str:
    """The conversation entries of a session (the first parameter) for which the SQL
    condition ``where`` holds, unordered, as :class:`ConversationEntry` columns."""

    source = "audit_log a"
    if d.name != "sqlite":  # PostgreSQL: parse each entry once (jsonb), not once per field
        source = "audit_log a CROSS JOIN LATERAL (SELECT a.data::jsonb AS data OFFSET 0) j"

    def field(name: str) -> str:
        return d.text(name, "a.data") if d.name == "sqlite" else f"(j.data ->> '{name}')"

    def of_call(expression: str) -> str:
        return f"CASE WHEN a.kind = 'tool_call.completed' THEN {expression} END"

    def of_any_call(expression: str) -> str:  # a call run, held or decided
        return f"CASE WHEN a.kind <> 'turn.started' AND a.kind <> 'turn.completed' " \
               f"THEN {expression} END"

    primary = (f"CASE a.kind WHEN 'turn.started' THEN {field('message_digest')} "
               f"WHEN 'turn.completed' THEN {field('reply_digest')} "
               f"WHEN 'tool_call.completed' THEN {field('result_digest')} END")
    status = (f"CASE a.kind WHEN 'turn.completed' THEN {field('status')} "
              f"WHEN 'tool_call.completed' THEN {field('tool_status')} "
              f"WHEN 'turn.paused' THEN {field('request_id')} "
              f"WHEN 'approval.decided' THEN {field('decision')} END")
    kinds = ", ".join(f"'{k}'" for k in CONVERSATION_KINDS)
    return (f"SELECT a.seq, a.kind, a.turn_id, {status}, {of_any_call(field('tool_call_id'))}, "
            f"{of_any_call(field('tool_name'))}, {body_near(d, primary)}, "
            f"{of_call(args_near(d, field('tool_call_id'), field('args_sha256')))}, {primary}, "
            f"{of_call(field('args_sha256'))} FROM {source} "
            f"WHERE a.session_id = {d.ph} AND {where} AND a.kind IN ({kinds})")


def _entries(rows: list[Any]) -> list[ConversationEntry]:
    return [ConversationEntry._make(r) for r in rows]


async def conversation(ledger: object, session_id: str,
                       after: int = -1) -> list[ConversationEntry]:
    """The conversation entries of ``session_id`` after entry ``after``, in ``seq``
    order (found through the session's index).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    return _entries(await reader.select(
        f"{_conversation(d, f'a.seq > {d.ph}')} ORDER BY a.seq", (session_id, after)))


async def conversation_before(ledger: object, session_id: str, before: int,
                              limit: int) -> list[ConversationEntry]:
    """At most ``limit`` conversation entries of ``session_id`` before entry
    ``before``, newest first: a conversation read back from its end, only as far as
    a window needs.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    return _entries(await reader.select(
        f"{_conversation(d, f'a.seq < {d.ph}')} ORDER BY a.seq DESC LIMIT {d.ph}",
        (session_id, before, limit)))


async def conversation_since(ledger: object, session_id: str, first: int,
                             head: int) -> list[ConversationEntry]:
    """What a conversation read before needs to be brought up to date, in ``seq``
    order: the entry ``first`` (the oldest one read before; it is missing when a
    prune removed it) and the entries after ``head`` (the newest one read before).
    Each is found through the session's index, so the cost is that of what is new,
    not of the session's length.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    return _entries(await reader.select(
        f"{_conversation(d, f'a.seq = {d.ph}')} UNION ALL "
        f"{_conversation(d, f'a.seq > {d.ph}')} ORDER BY 1",
        (session_id, first, session_id, head)))
