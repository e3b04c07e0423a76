"""The SQL a session is read with, in both dialects (plain reads of the audit tier
and the content tier; no table of its own: the ledger is the only store)."""

from __future__ import annotations

from overt.ledger.sql import BODY_WINDOW, Dialect, content_order, content_seq

CONVERSATION_KINDS = ("turn.started", "tool_call.completed", "turn.paused",
                      "approval.decided", "turn.completed")
"""The entries a conversation is rebuilt from: each turn's message, its tool calls
with their results, its answer, and (until it has one) the approval it waits for."""


def _body(d: Dialect, digest: str) -> str:
    """The body the SQL expression ``digest`` names, stored with entry ``a`` or (for
    ledgers that keyed bodies by their transaction's first seq) a little before it."""
    return (f"coalesce((SELECT c.body FROM content_blobs c "
            f"WHERE {content_seq(d, '=', 'a.seq', 'c')} AND c.digest = {digest}), "
            f"(SELECT c.body FROM content_blobs c WHERE {content_seq(d, '<', 'a.seq', 'c')} "
            f"AND {content_seq(d, '>', f'a.seq - {BODY_WINDOW}', 'c')} AND c.digest = {digest} "
            f"ORDER BY {content_order(d, 'c')} DESC LIMIT 1))")


def _conversation(d: Dialect, where: str) -> str:
    """The conversation entries of a session (the first parameter) for which the SQL
    condition ``where`` holds, unordered (see :func:`conversation`)."""

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
            f"{of_any_call(field('tool_name'))}, {_body(d, primary)}, "
            f"{of_call(_body(d, field('args_sha256')))}, {primary}, "
            f"{of_call(field('args_sha256'))} FROM {source} "
            f"WHERE a.session_id = {d.ph} AND {where} AND a.kind IN ({kinds})")


def conversation(d: Dialect) -> str:
    """(seq, kind, turn_id, status, tool_call_id, tool_name, body, args_body, digest,
    args_digest) of a session's conversation entries after a ``seq``, in ``seq``
    order. ``status`` is a turn's or a tool call's, the approval request a paused
    turn waits for (``turn.paused``), or an approval's decision
    (``approval.decided``, whose ``tool_call_id`` and ``tool_name`` name the held
    call, as a pause's do); ``body`` the message
    (turn.started), the result (tool_call.completed) or the answer (turn.completed);
    ``args_body`` a tool call's arguments; ``digest`` and ``args_digest`` what the
    entry says they hash to (the reader checks them). The fields are read here, so
    the reader parses no entry's JSON. Parameters: the session id, the seq."""
    return f"{_conversation(d, f'a.seq > {d.ph}')} ORDER BY a.seq"


def conversation_before(d: Dialect) -> str:
    """A session's conversation entries before a ``seq``, newest first, at most a
    number of them (the columns of :func:`conversation`): a conversation read back
    from its end, only as far as a window needs. Parameters: the session id, the
    seq, the limit."""
    return f"{_conversation(d, f'a.seq < {d.ph}')} ORDER BY a.seq DESC LIMIT {d.ph}"


def conversation_since(d: Dialect) -> str:
    """What a conversation read before needs to be brought up to date, in ``seq``
    order (the columns of :func:`conversation`): the entry at a first ``seq`` (the
    oldest one read before; it is missing when a prune removed it) and the entries
    after a second ``seq`` (the newest one read before). Each is found through the
    session's index, so the cost is that of what is new, not of the session's
    length. Parameters: the session id, the first seq, the session id, the second."""
    return (f"{_conversation(d, f'a.seq = {d.ph}')} UNION ALL "
            f"{_conversation(d, f'a.seq > {d.ph}')} ORDER BY 1")


def first_turn(d: Dialect) -> str:
    """(seq, kind, data) of a session's first ``turn.started`` or ``turn.completed``
    entry (the entry :func:`session` joins its summary to: the session's owner is
    the actor of its first turn, when that entry is the turn's start). One
    parameter, the session id; found through the session's index, however long the
    session is."""
    return ("SELECT seq, kind, data FROM audit_log WHERE session_id = "
            f"{d.ph} AND kind IN ('turn.started', 'turn.completed') ORDER BY seq LIMIT 1")


def _summaries(d: Dialect, where: str) -> str:
    """(session_id, turns, started_at, last_at, first_seq, first_data) per session."""
    return ("SELECT g.session_id, g.turns, g.started_at, g.last_at, f.seq, f.data FROM ("
            "SELECT session_id, sum(CASE WHEN kind = 'turn.started' THEN 1 ELSE 0 END) "
            "AS turns, min(seq) AS first_seq, min(at) AS started_at, max(at) AS last_at "
            "FROM audit_log WHERE kind IN ('turn.started', 'turn.completed') "
            f"AND session_id IS NOT NULL {where} GROUP BY session_id) g "
            "JOIN audit_log f ON f.seq = g.first_seq AND f.kind = 'turn.started'")


def session(d: Dialect) -> str:
    """One session's summary (see :func:`_summaries`); one parameter, its id."""
    return _summaries(d, f"AND session_id = {d.ph}")


def owner_expr(d: Dialect) -> str:
    """The owner of a summary row: the actor its first turn recorded, or the legacy
    owner (the first parameter) for turns recorded before owners were."""
    actor = d.text("actor", "f.data")
    return f"coalesce(nullif({actor}, ''), {d.ph})"


SEARCHED_KINDS = ("turn.started", "turn.completed")
"""The entries whose bodies a text search reads: each turn's message and its answer."""


def contains(d: Dialect, body: str) -> str:
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


def says(d: Dialect, session: str) -> str:
    """Whether a message or an answer of the session the SQL expression ``session``
    names contains the next parameter (see :func:`contains`)."""
    digest = (f"CASE a.kind WHEN 'turn.started' THEN {d.text('message_digest', 'a.data')} "
              f"ELSE {d.text('reply_digest', 'a.data')} END")
    kinds = ", ".join(f"'{k}'" for k in SEARCHED_KINDS)
    return (f"EXISTS (SELECT 1 FROM audit_log a WHERE a.session_id = {session} "
            f"AND a.kind IN ({kinds}) AND {contains(d, _body(d, digest))})")


def sessions(d: Dialect, *, by_owner: bool, by_source: bool, since: bool = False,
             until: bool = False, text: bool = False) -> str:
    """Summaries, newest activity first. Parameters, in order: the legacy owner and
    the owner (``by_owner``), the source (``by_source``), the time the session was
    last active at or after (``since``), the time it started before (``until``),
    the text one of its messages or answers holds (``text``), then the limit."""
    filters = []
    if by_owner:
        filters.append(f"{owner_expr(d)} = {d.ph}")
    if by_source:
        filters.append(f"{d.text('source', 'f.data')} = {d.ph}")
    if since:
        filters.append(f"g.last_at >= {d.ph}")
    if until:
        filters.append(f"g.started_at < {d.ph}")
    if text:
        filters.append(says(d, "g.session_id"))
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    return (f"SELECT x.* FROM ({_summaries(d, '')}{where}) x "
            f"ORDER BY x.last_at DESC, x.session_id DESC LIMIT {d.ph}")
