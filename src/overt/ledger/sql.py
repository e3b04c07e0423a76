"""The ledger's queries, written once for SQLite and PostgreSQL.

A :class:`Dialect` says how each backend spells a placeholder and a JSON field;
the functions here build the statements from it. Both backends store ``data``
as text (the exact canonical bytes the chain hashes) and read fields out of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from overt.ledger import trail_index
from overt.ledger.chain import BODY_FIELDS, CONTENT_CANDIDATES, ENTRY_COLUMNS

# Kinds that mean a turn is waiting on something outside it (an approval); a
# turn whose latest such entry has no completion after it is never pruned.
WAITING_KINDS = ("turn.paused", "approval.requested")


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    ph: str  # the placeholder: ? or %s

    def text(self, field: str, column: str = "data") -> str:
        """A JSON field of ``column`` as text."""
        if self.name == "sqlite":
            return f"json_extract({column}, '$.{field}')"
        return f"({column}::json ->> '{field}')"

    def number(self, field: str) -> str:
        """A JSON field of ``data`` as a number."""
        if self.name == "sqlite":
            return f"json_extract(data, '$.{field}')"
        return f"({self.text(field)})::double precision"

    def phs(self, n: int) -> str:
        return ", ".join([self.ph] * n)


SQLITE = Dialect("sqlite", "?")
POSTGRES = Dialect("postgres", "%s")


def failure_condition(d: Dialect) -> str:
    """An entry that records a failure, a plugin's (``hook.error``) among them (shared
    by the partial index ``audit_log_failures`` and its queries)."""
    return (f"(kind = 'turn.completed' AND {d.text('status')} != 'completed')"
            f" OR (kind = 'tool_call.completed' AND {d.text('tool_status')} != 'ok')"
            f" OR (kind = 'inference' AND {d.text('error_type')} IS NOT NULL)"
            " OR kind = 'hook.error'")


HEAD = "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"

UNINDEXED_KINDS = ("reasoning.step", "policy.decision", "tool_call.started")
"""Kinds a turn writes several times, never looked up by kind over time: left out of
``audit_log_kind_at``. Each kind in a commit dirties a page of that
index of its own, written whole to the WAL, and these three made up two thirds of
those pages. They are found by turn or by session; steps by time through
``audit_log_steps_at``."""

KIND_INDEXED = f"kind NOT IN ({', '.join(repr(k) for k in UNINDEXED_KINDS)})"
"""The condition of ``audit_log_kind_at``. A query by kind states it word for word
(:func:`of_kinds`): SQLite uses a partial index only for a query whose WHERE holds
the index's own terms."""


def kind_indexed(alias: str = "") -> str:
    """:data:`KIND_INDEXED` on the entries of table alias ``alias`` (none: ``audit_log``)."""
    return KIND_INDEXED.replace("kind", f"{alias}.kind", 1) if alias else KIND_INDEXED


def of_kinds(d: Dialect, kinds: Sequence[str], alias: str = "") -> str:
    """``kind IN (...)`` for ``kinds`` (bound as parameters, in order), with
    :data:`KIND_INDEXED` when every one of them is in ``audit_log_kind_at``."""
    column = f"{alias}.kind" if alias else "kind"
    where = f"{column} = {d.ph}" if len(kinds) == 1 else f"{column} IN ({d.phs(len(kinds))})"
    if not any(k in UNINDEXED_KINDS for k in kinds):
        where += " AND " + kind_indexed(alias)
    return where


KIND_INDEX = f"CREATE INDEX audit_log_kind_at ON audit_log (kind, at) WHERE {KIND_INDEXED}"
"""Entries by kind and time, the high-volume kinds left out."""


def steps_index(d: Dialect) -> str:
    """Reasoning steps by time, and by phase within a time: ``overt trail --phase
    error`` across sessions reads this index, not every entry (per turn, steps are
    found by ``audit_log_turn``). Time first, not phase: a commit's steps then go to
    the index's last page, not to one page per phase."""
    return (f"CREATE INDEX audit_log_steps_at ON audit_log (at, ({d.text('phase')})) "
            "WHERE kind = 'reasoning.step'")


def insert_entries(d: Dialect) -> str:
    return f"INSERT INTO audit_log ({ENTRY_COLUMNS}) VALUES ({d.phs(9)})"


def claim_exists(d: Dialect) -> str:
    """Whether a once-only entry of a kind with a claim is on the record (uses the
    ``audit_log_claims`` index)."""
    return (f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE kind = {d.ph} "
            f"AND {d.text('claim')} = {d.ph} AND {d.text('claim')} IS NOT NULL LIMIT 1")


def claims_index(d: Dialect) -> str:
    """At most one entry per (kind, claim): the database's own guarantee of once-only."""
    return (f"CREATE UNIQUE INDEX audit_log_claims ON audit_log (kind, ({d.text('claim')})) "
            f"WHERE {d.text('claim')} IS NOT NULL")


REPLY_FAILED = "kind = 'channel.reply_failed'"
"""The condition of ``audit_log_reply_failures``, stated word for word by its query
(SQLite uses a partial index only for a query whose WHERE holds the index's terms)."""


def reply_failures_index(d: Dialect) -> str:
    """The failed attempts of a reply by the claim it is owed under, so
    a delivery sweep counts one reply's, not every failure on the record."""
    return (f"CREATE INDEX audit_log_reply_failures ON audit_log (({d.text('reply_claim')})) "
            f"WHERE {REPLY_FAILED}")


def reply_failures(d: Dialect) -> str:
    """How many ``channel.reply_failed`` entries name the reply claim (the parameter)."""
    return (f"SELECT count(*) FROM audit_log WHERE {REPLY_FAILED} "
            f"AND {d.text('reply_claim')} = {d.ph}")


DIRECT_CALLS = "kind IN ('tool_call.started', 'tool_call.completed') AND coalesce(turn_id, '') = ''"
"""The condition of ``audit_log_direct_calls``: the records of calls made outside any
turn (a direct run, a released quarantined call; a turn's calls are found by turn),
stated word for word by its query. Not ``turn_id IS NULL``: SQLite, with no statistics,
reads that through ``audit_log_turn``, every entry outside a turn, for an ``IN`` list."""


def direct_calls_index(d: Dialect) -> str:
    """Calls outside a turn by their id: an approval request names its
    call, and one outside a turn has no turn to find it by."""
    return (f"CREATE INDEX audit_log_direct_calls ON audit_log (({d.text('tool_call_id')})) "
            f"WHERE {DIRECT_CALLS}")


TURN_ORDER_FIELDS = ("cost_usd", "duration_ms")
"""The ``turn.completed`` fields a table of turns is ordered by, each indexed."""


def turn_value(d: Dialect, field: str, alias: str = "") -> str:
    """``turn.completed``'s ``field`` (one of :data:`TURN_ORDER_FIELDS`) as a number,
    the expression its index holds (a query states it word for word)."""
    column = f"{alias}.data" if alias else "data"
    if d.name == "sqlite":
        return f"json_extract({column}, '$.{field}')"
    return f"(({column}::json ->> '{field}')::double precision)"


def turn_order_indexes(d: Dialect) -> str:
    """The turns by cost and by duration, then ``seq`` (a page of the
    dearest or slowest turns is a range of one, whatever the ledger's size)."""
    return "".join(
        f"CREATE INDEX audit_log_turn_{field.split('_')[0]} ON audit_log "
        f"({turn_value(d, field)}, seq) WHERE kind = 'turn.completed';\n"
        for field in TURN_ORDER_FIELDS)


def direct_calls(d: Dialect, n: int) -> str:
    """The entries of :data:`DIRECT_CALLS` of ``n`` tool-call ids (the parameters)."""
    return (f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE {DIRECT_CALLS} "
            f"AND {d.text('tool_call_id')} IN ({d.phs(n)}) ORDER BY seq")


def chunks(values: Sequence[str], size: int = 500) -> list[list[str]]:
    """``values``, each once, in lists of at most ``size``: the parameters of one
    ``IN (...)`` each."""
    once = list(dict.fromkeys(values))
    return [once[i:i + size] for i in range(0, len(once), size)]


def paused_reply(d: Dialect, alias: str = "") -> str:
    """The condition of ``audit_log_paused_replies``: a reply that said its turn awaits
    an approval (the query states it word for word, on the table alias ``alias``)."""
    prefix = f"{alias}." if alias else ""
    return (f"{prefix}kind = 'channel.replied' "
            f"AND {d.text('awaiting_approval', f'{prefix}data')} IS NOT NULL")


def paused_replies_index(d: Dialect) -> str:
    """Replies that said their turn awaits an approval: a delivery sweep
    reads those, not every reply ever sent."""
    return f"CREATE INDEX audit_log_paused_replies ON audit_log (seq) WHERE {paused_reply(d)}"


def unresumed_replies(d: Dialect) -> str:
    """The replies of :func:`paused_reply` whose resumed reply, the ``channel.replied``
    claimed ``{claim}:resumed:{awaiting_approval}``, is not on the record (looked up
    through ``audit_log_claims``)."""
    columns = ", ".join(f"p.{c}" for c in ENTRY_COLUMNS.split(", "))
    resumed = (f"{d.text('claim', 'p.data')} || ':resumed:' || "
               f"{d.text('awaiting_approval', 'p.data')}")
    return (f"SELECT {columns} FROM audit_log p WHERE {paused_reply(d, 'p')} "
            "AND NOT EXISTS (SELECT 1 FROM audit_log r WHERE r.kind = 'channel.replied' "
            f"AND {d.text('claim', 'r.data')} = {resumed} "
            f"AND {d.text('claim', 'r.data')} IS NOT NULL) ORDER BY p.seq")


WRITE_FUNCTION_PREFIX = "overt_write_"
"""On PostgreSQL a row beside the chain is written through ``overt_write_<table>``, a
``SECURITY DEFINER`` function of the ledger's owner that checks the row against the
chain (:mod:`overt.ledger.schema.derived`); the writer role may execute
it and has no ``INSERT`` on the table itself."""


def insert_row(d: Dialect, table: str, columns: Sequence[str]) -> str:
    """The statement that writes a row of a table that records beside the chain
    (memory, the Merkle tree's tiles), its values the parameters in ``columns``
    order: on SQLite an ``INSERT``; on PostgreSQL a call of the owner's
    ``overt_write_<table>(p_<column> => ...)``, which refuses a row the chain does
    not record (see :data:`WRITE_FUNCTION_PREFIX`).

    Raises:
        ValueError: the table or a column is not a plain identifier, or is one of
            the chain's own tables.
    """
    for name in (table, *columns):
        if not name.replace("_", "").isalnum() or not name.isascii() or name[0].isdigit():
            raise ValueError(f"not a plain SQL identifier: {name!r}")
    if table in ("audit_log", "content_blobs", "trail_index", "overt_migrations"):
        raise ValueError(f"{table} is written only by the chain itself")
    if d.name == "postgres":
        args = ", ".join(f"p_{c} => {d.ph}" for c in columns)
        return f"SELECT {WRITE_FUNCTION_PREFIX}{table}({args})"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({d.phs(len(columns))})"


CONTENT_KEY_SHIFT = 20
"""SQLite keys each body ``seq << 20 | n``, ``n`` counting the bodies
kept under one ``seq`` from 0: ``content_blobs`` is then a rowid table that a
commit appends to, where a table keyed (seq, digest) was a b-tree of keys whose
every full leaf was rebalanced across three siblings (three pages written per
commit, where one now does). PostgreSQL keeps (seq, digest)."""
CONTENT_KEY_MASK = (1 << CONTENT_KEY_SHIFT) - 1


def content_seq(d: Dialect, op: str, seq: str, alias: str = "") -> str:
    """Content rows whose ``seq`` is ``op`` (``=``, ``<``, ``<=``, ``>``) the SQL
    expression ``seq``: on SQLite a range of the rowid key, so a seek, not a scan."""
    prefix = f"{alias}." if alias else ""
    if d.name != "sqlite":
        return f"{prefix}seq {op} {seq}"
    low = f"(({seq}) << {CONTENT_KEY_SHIFT})"
    high = f"({low} + {CONTENT_KEY_MASK})"
    ranges = {"=": f"{prefix}key BETWEEN {low} AND {high}", "<": f"{prefix}key < {low}",
              "<=": f"{prefix}key <= {high}", ">": f"{prefix}key > {high}"}
    return ranges[op]


def content_order(d: Dialect, alias: str = "") -> str:
    """The column that orders content rows by ``seq``."""
    return (f"{alias}." if alias else "") + ("key" if d.name == "sqlite" else "seq")


def insert_content(d: Dialect) -> str:
    """SQLite's insert of a body: (key, seq, digest, body, created_at)."""
    return (f"INSERT INTO content_blobs (key, seq, digest, body, created_at) "
            f"VALUES ({d.phs(5)})")


def select_entries(d: Dialect, *, turn_id: str | None, session_id: str | None,
                   kinds: Sequence[str] | None, since: str | None, until: str | None,
                   limit: int | None) -> tuple[str, list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("turn_id", turn_id), ("session_id", session_id)):
        if value is not None:
            where.append(f"{column} = {d.ph}")
            params.append(value)
    if kinds:
        # by kind alone, through audit_log_kind_at; with a turn or session, through theirs
        where.append(of_kinds(d, kinds) if turn_id is None and session_id is None
                     else f"kind IN ({d.phs(len(kinds))})")
        params.extend(kinds)
    if since is not None:
        where.append(f"at >= {d.ph}")
        params.append(since)
    if until is not None:
        where.append(f"at < {d.ph}")
        params.append(until)
    sql = f"SELECT {ENTRY_COLUMNS} FROM audit_log"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY seq"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, params


def reasoning_steps_view(d: Dialect) -> str:
    """The ``reasoning_steps`` view, for SQL users. The step's text is in
    ``content_blobs`` under ``content_digest``."""
    number = d.text("step_number")
    if d.name != "sqlite":
        number = f"({number})::integer"
    return (f"CREATE VIEW reasoning_steps AS SELECT {d.text('step_id')} AS id, turn_id, "
            f"session_id, {number} AS step_number, {d.text('phase')} AS phase, "
            f"{d.text('content_digest')} AS content_digest, "
            f"{d.text('tool_call_id')} AS linked_tool_call, "
            f"{d.text('policy_decision_id')} AS linked_policy_decision, "
            f"{d.text('approval_request_id')} AS linked_approval_request, "
            "at AS created_at, seq FROM audit_log WHERE kind = 'reasoning.step'")


_TRAIL_KINDS = ", ".join(f"'{k}'" for k in trail_index.TRAIL_KINDS)

BODY_WINDOW = 4096
"""How far back (in entries) a read looks for a body stored with an earlier entry of
the commit that names it (:func:`body_of`,
:func:`overt.ledger.reads.conversations.body_near`): more than any one transaction of a
turn holds. A body that an earlier commit stored is not looked for this way: what lies
between two commits of a turn is whatever other sessions wrote meanwhile, without bound
(a tool call's arguments are found through its ``tool_call.started``,
:func:`overt.ledger.reads.conversations.args_near`)."""


def body_of(d: Dialect, column: str) -> str:
    """``column`` (``body``, ``key``) of the content row holding the body that entry
    ``a`` of a kind in :data:`~overt.ledger.trail_index.BODY_FIELDS` names; NULL for
    other kinds, and where the body is not stored.

    A body is keyed by the seq of the first entry of its commit that names it
    (:func:`~overt.ledger.chain.content_rows`), so most entries find theirs at their
    own seq. Some find it earlier in their commit: the second of two steps with the
    same text. For those the search goes back at most :data:`BODY_WINDOW` entries, so
    a body that is not there, never stored or pruned, costs a bounded walk, not one
    through the whole content tier. A step's text and a turn's message are committed
    with the entry that names them, never only by an earlier commit, so no body of
    these kinds lies further back than its own commit."""
    # one JSON field read per row, not two: a step names content_digest, a turn
    # its message_digest
    digest = (f"CASE a.kind WHEN 'reasoning.step' THEN {d.text('content_digest', 'a.data')} "
              f"ELSE {d.text('message_digest', 'a.data')} END")
    return (f"CASE WHEN a.kind IN ('reasoning.step', 'turn.started') THEN coalesce(("
            f"SELECT c.{column} FROM content_blobs c WHERE {content_seq(d, '=', 'a.seq', 'c')} "
            f"AND c.digest = {digest}), "
            f"(SELECT c.{column} FROM content_blobs c WHERE {content_seq(d, '<', 'a.seq', 'c')} "
            f"AND {content_seq(d, '>', f'a.seq - {BODY_WINDOW}', 'c')} AND c.digest = {digest} "
            f"ORDER BY {content_order(d, 'c')} DESC LIMIT 1)) END")


def _derived_field(field: str) -> str:
    """A trail-index column computed in SQL from entry ``a`` (its data as ``jsonb`` in
    ``a.v``) exactly as :func:`overt.ledger.trail_index.index_row` computes it: numbers
    in the number columns, a string as itself, another value as its canonical JSON
    (the exact text of the field in the stored canonical ``data``), ``NULL`` for a
    kind without the field."""
    kinds = ", ".join(f"'{k}'" for k, fields in trail_index.TRAIL_FIELDS.items()
                      if field in fields)
    j, raw = f"a.v -> '{field}'", "a.data::json"
    if field in trail_index.INTEGER_FIELDS:  # an int, not 3.0 nor 1e2 (the text as written)
        value = (f"CASE WHEN jsonb_typeof({j}) = 'number' THEN CASE WHEN ({raw} ->> '{field}') "
                 f"~ '^-?[0-9]+$' THEN (a.v ->> '{field}')::bigint END END")
    elif field in trail_index.REAL_FIELDS:
        value = f"CASE WHEN jsonb_typeof({j}) = 'number' THEN (a.v ->> '{field}')::float8 END"
    else:
        value = (f"CASE jsonb_typeof({j}) WHEN 'string' THEN a.v ->> '{field}' "
                 f"WHEN 'null' THEN NULL ELSE ({raw} -> '{field}')::text END")
    return f"CASE WHEN a.kind IN ({kinds}) THEN {value} END"


def trail_index_derive(entries: str) -> str:
    """PostgreSQL: insert the trail-index rows of the entries in relation ``entries``
    (the statement's new rows, in the owner's trigger on ``audit_log``), computed from
    each entry as :func:`overt.ledger.trail_index.index_row` does, the body found as
    ``verify`` finds it (:func:`body_of`). A row already there is left as it is
    (``verify`` checks every row against its entry)."""
    digest = {kind: f"CASE WHEN jsonb_typeof(a.v -> '{field}') = 'string' "
                    f"THEN a.v ->> '{field}' END"
              for kind, field in trail_index.BODY_FIELDS.items()}
    columns = {
        "session_id": "coalesce(a.session_id, '')", "seq": "a.seq", "turn_id": "a.turn_id",
        "kind": "a.kind", "at": "a.at",
        "body_digest": "CASE a.kind " + " ".join(
            f"WHEN '{k}' THEN {v}" for k, v in digest.items()) + " END",
        "body_seq": body_of(POSTGRES, "seq"),
        **{f: _derived_field(f) for f in trail_index.FIELD_COLUMNS},
    }
    assert tuple(columns) == trail_index.COLUMNS
    return (f"WITH a AS MATERIALIZED (SELECT seq, kind, at, turn_id, session_id, data, "
            f"data::jsonb AS v FROM {entries} WHERE kind IN ({_TRAIL_KINDS}) "
            f"AND turn_id IS NOT NULL) "
            f"INSERT INTO trail_index ({', '.join(columns)}) "
            f"SELECT {', '.join(columns.values())} FROM a ORDER BY a.seq "
            f"ON CONFLICT DO NOTHING")


def delete_trail_index_through(d: Dialect) -> str:
    return f"DELETE FROM trail_index WHERE seq <= {d.ph}"


def trail_index_check(d: Dialect) -> str:
    """Each entry the trail index should hold, the seq its body is found under, and
    the index's row for it (see :func:`overt.ledger.trail_index.check`)."""
    columns = ", ".join(f"t.{c}" for c in trail_index.COLUMNS)
    return (f"SELECT a.seq, a.kind, a.at, a.turn_id, a.session_id, a.data, "
            f"{body_of(d, 'seq')}, {columns} FROM audit_log a LEFT JOIN trail_index t "
            "ON t.session_id = coalesce(a.session_id, '') AND t.kind = a.kind AND t.seq = a.seq "
            f"WHERE a.kind IN ({_TRAIL_KINDS}) AND a.turn_id IS NOT NULL ORDER BY a.seq")


def select_content(d: Dialect, *, near_seq: bool) -> str:
    """The bodies stored under a digest (the first few: a read takes the first that
    matches it, :func:`overt.ledger.chain.checked_body`); with ``near_seq``,
    searching back from the referencing entry, nearest first."""
    if near_seq:
        return (f"SELECT body FROM content_blobs WHERE {content_seq(d, '<=', d.ph)} "
                f"AND digest = {d.ph} ORDER BY {content_order(d)} DESC "
                f"LIMIT {CONTENT_CANDIDATES}")
    return f"SELECT body FROM content_blobs WHERE digest = {d.ph} LIMIT {CONTENT_CANDIDATES}"


def recent_turns(d: Dialect) -> str:
    return ("SELECT turn_id, session_id, started_at, source, model, status, tools_used, "
            f"duration_ms FROM turns ORDER BY started_at DESC, turn_id DESC LIMIT {d.ph}")


USAGE_GROUPS = ("route", "model", "day", "session")


def usage(d: Dialect, by: Sequence[str] = ("route", "model")) -> str:
    """Inference totals per group; ungrouped columns read ``*``.

    Raises:
        ValueError: ``by`` names something other than route, model, day.
    """
    unknown = set(by) - set(USAGE_GROUPS)
    if unknown or not by:
        raise ValueError(f"usage groups by {USAGE_GROUPS}, not {sorted(unknown) or 'nothing'}")
    columns = {"route": d.text("route"), "model": d.text("model"), "day": "substr(at, 1, 10)",
               "session": "coalesce(session_id, '')"}
    selected = [columns[g] if g in by else "'*'" for g in USAGE_GROUPS]
    return (f"SELECT {', '.join(selected)}, count(*), "
            f"coalesce(sum({d.number('input_tokens')}), 0), "
            f"coalesce(sum({d.number('output_tokens')}), 0), "
            f"coalesce(sum({d.number('cost_usd')}), 0.0) "
            f"FROM audit_log WHERE kind = 'inference' AND {KIND_INDEXED} "
            f"AND at >= {d.ph} AND at < {d.ph} "
            f"GROUP BY 1, 2, 3, 4 ORDER BY 3 DESC, 8 DESC, 6 DESC")


def spent(d: Dialect, *, session: bool) -> str:
    """Tokens (input + output) and dollars of inferences since a time (and of one session)."""
    if session:  # through the session's own entries, not every inference since then
        where = f"kind = 'inference' AND at >= {d.ph} AND session_id = {d.ph}"
    else:
        where = f"kind = 'inference' AND {KIND_INDEXED} AND at >= {d.ph}"
    return (f"SELECT coalesce(sum({d.number('input_tokens')} + {d.number('output_tokens')}), 0),"
            f" coalesce(sum({d.number('cost_usd')}), 0.0) FROM audit_log WHERE {where}")


def count(d: Dialect, kind: str) -> str:
    """Entries of ``kind`` (the first parameter) at or after a time (the second)."""
    return f"SELECT count(*) FROM audit_log WHERE {of_kinds(d, [kind])} AND at >= {d.ph}"


def last_error(d: Dialect) -> str:
    return (f"SELECT {ENTRY_COLUMNS} FROM audit_log WHERE {failure_condition(d)} "
            "ORDER BY seq DESC LIMIT 1")


VERIFY = f"SELECT {ENTRY_COLUMNS} FROM audit_log ORDER BY seq"
"""The chain as ``verify`` reads it: the stored columns, from which it builds each
entry's hash preimage (:func:`overt.ledger.chain.verify_rows`)."""


def prune_anchors(d: Dialect) -> str:
    return (f"SELECT {d.text('through_seq')}, {d.text('last_removed_hash')} FROM audit_log "
            f"WHERE kind = 'ledger.pruned' AND {KIND_INDEXED}")


def first_newer(d: Dialect) -> str:
    """The first entry at or after the cutoff: everything before it may be pruned."""
    return f"SELECT min(seq) FROM audit_log WHERE at >= {d.ph}"


def first_waiting(d: Dialect) -> str:
    """The first entry of the oldest turn still waiting on something, up to a seq."""
    kinds = ", ".join(f"'{k}'" for k in WAITING_KINDS)
    return (
        f"SELECT min(s.seq) FROM audit_log s WHERE s.kind = 'turn.started' "
        f"AND {kind_indexed('s')} AND s.seq <= {d.ph} "
        f"AND EXISTS (SELECT 1 FROM audit_log w WHERE w.turn_id = s.turn_id "
        f"AND w.kind IN ({kinds})) "
        "AND NOT EXISTS (SELECT 1 FROM audit_log c WHERE c.turn_id = s.turn_id "
        "AND c.kind = 'turn.completed')"
    )


def prune_range(d: Dialect) -> str:
    """What a prune through ``seq`` removes: count, first and last seq and time."""
    return (f"SELECT count(*), min(seq), max(seq), min(at), max(at) FROM audit_log "
            f"WHERE seq <= {d.ph}")


def hash_at(d: Dialect) -> str:
    return f"SELECT hash FROM audit_log WHERE seq = {d.ph}"


def count_content_through(d: Dialect) -> str:
    return f"SELECT count(*) FROM content_blobs WHERE {content_seq(d, '<=', d.ph)}"


def delete_content_through(d: Dialect) -> str:
    return f"DELETE FROM content_blobs WHERE {content_seq(d, '<=', d.ph)}"


def delete_entries_through(d: Dialect) -> str:
    return f"DELETE FROM audit_log WHERE seq <= {d.ph}"


def body_pointers(d: Dialect) -> str:
    """(seq, one column per :data:`overt.ledger.chain.BODY_FIELDS`) of every entry
    pointing to a body, in ``seq`` order."""
    columns = ", ".join(d.text(f) for f in BODY_FIELDS)
    return f"SELECT seq, {columns} FROM audit_log ORDER BY seq"
