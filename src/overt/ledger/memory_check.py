"""``verify``'s check of the memory tables against the chain, the same on every backend.

The memory graph's rows (``memory_nodes``, ``memory_links``,
``memory_link_retractions``) live beside the chain, and the agent reads them as
its memory. Each is written in the transaction that appends the entry recording
it (``node.created``, ``node.superseded``, ``link.created``, ``link.retracted``,
see :mod:`overt.memory.store`), and that entry holds what the row says: ids,
kinds, the actor, and the digests of a node's title and body. So a row changed,
deleted or inserted behind the ledger's back (an ``INSERT`` needs no guard
dropped) disagrees with the chain, and ``verify`` names it here rather than let
the agent believe it.

Memory is never pruned, but the entries recording it may be: a row whose entry is
gone is accounted for only when a recorded prune removed entries up to a time at
or after the row's ``created_at`` (a row is stamped before its entry is appended).
That time is the row's own word: a forged row back-dated into a pruned range
passes, which only signed checkpoints taken before the prune (and the memory
rows they cannot cover) would tell.

Each entry's provenance is checked too (:func:`provenance_problem`): an entry
naming a tool call must have been recorded while that call ran, in its turn and
session, so no write can be laid at another conversation's door; one from the API
or the CLI names no turn and no call. (PostgreSQL's owner functions refuse a row
whose entry fails it: :mod:`overt.ledger.schema.derived`.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from overt.events import MEMORY_ORIGINS
from overt.ledger.base import VerifyReport
from overt.ledger.canonical import digest_text
from overt.ledger.chain import entry_data
from overt.ledger.reads.memory_search import tags
from overt.ledger.sql import KIND_INDEXED, Dialect, chunks, direct_calls

MEMORY_KINDS = ("node.created", "node.superseded", "link.created", "link.retracted")
"""The kinds of entry that record a row of the memory tables."""

_TABLE = {"node.created": "memory_nodes", "node.superseded": "memory_nodes",
          "link.created": "memory_links", "link.retracted": "memory_link_retractions"}

_NOUN = {"memory_nodes": "memory node", "memory_links": "memory link",
         "memory_link_retractions": "retraction of memory link"}

_READS = {
    "memory_nodes": ("SELECT id, kind, title, body, actor, created_at, supersedes, root_id, "
                     "revision, turn_id, search_tags, session_id, tool_call_id, origin "
                     "FROM memory_nodes"),
    "memory_links": ("SELECT id, kind, from_id, to_id, actor, created_at, turn_id, session_id, "
                     "tool_call_id, origin FROM memory_links"),
    "memory_link_retractions": ("SELECT link_id, actor, created_at, turn_id, session_id, "
                                "tool_call_id, origin FROM memory_link_retractions"),
}

Key = tuple[str, str]
"""(table, the row's id)"""


def _expected(kind: str, turn_id: str | None, session_id: str | None,
              data: dict[str, Any]) -> tuple[Key, tuple[Any, ...]]:
    """The row an entry records: its table and id, and what the row must say."""
    stamp = (turn_id, session_id, data.get("tool_call_id"), data.get("origin"))
    if kind == "node.created":
        node = str(data.get("node_id"))
        return ("memory_nodes", node), (
            data.get("node_kind"), data.get("title_digest"), data.get("body_digest"),
            data.get("actor"), None, node, 1, *stamp)
    if kind == "node.superseded":
        return ("memory_nodes", str(data.get("node_id"))), (
            data.get("node_kind"), data.get("title_digest"), data.get("body_digest"),
            data.get("actor"), data.get("supersedes"), data.get("root_id"),
            data.get("revision"), *stamp)
    if kind == "link.created":
        return ("memory_links", str(data.get("link_id"))), (
            data.get("link_kind"), data.get("from_id"), data.get("to_id"), data.get("actor"),
            *stamp)
    return ("memory_link_retractions", str(data.get("link_id"))), (data.get("actor"), *stamp)


def _actual(table: str, row: tuple[Any, ...]) -> tuple[str, str, tuple[Any, ...], bool]:
    """(id, created_at, what the row says as :func:`_expected` puts it, whether its
    derived columns are consistent) for a row read by :data:`_READS`."""
    if table == "memory_nodes":
        (node_id, kind, title, body, actor, created, supersedes, root, revision, turn,
         search_tags, *stamp) = row
        said = (kind, digest_text(title), digest_text(body), actor, supersedes, root,
                int(revision), turn, *stamp)
        return node_id, created, said, search_tags == tags(kind, actor)
    if table == "memory_links":
        link_id, kind, from_id, to_id, actor, created, turn, *stamp = row
        return link_id, created, (kind, from_id, to_id, actor, turn, *stamp), True
    link_id, actor, created, turn, *stamp = row
    return link_id, created, (actor, turn, *stamp), True


Call = tuple[int, str, str | None, str | None, str | None]
"""An entry about a tool call or a turn's end: (seq, kind, turn_id, session_id,
tool_call_id)."""


def call_running(seq: int, turn_id: str | None, session_id: str | None, call_id: str,
                 calls: list[Call], pruned: bool) -> bool:
    """Whether tool call ``call_id`` ran at entry ``seq``, in turn ``turn_id`` (``None``:
    outside any turn) of ``session_id``: of the entries before ``seq`` that start or
    complete that call, or end the turn, the newest is the call's ``tool_call.started``,
    in that session. ``calls``: the entries of that turn (or of calls outside a turn)
    about calls and the turn's start and end, in seq order.

    When none is found and the ledger was pruned (``pruned``), the call's start may
    have gone with the pruned range if its turn began there (no ``turn.started``
    left), or if it ran outside any turn: then it counts as running, as a body of
    such a turn counts as present (:func:`overt.ledger.chain.with_body_check`).
    PostgreSQL's ``overt_memory_call_running`` decides the same
    (:mod:`overt.ledger.schema.derived`)."""
    newest: Call | None = None
    for record in calls:
        at, kind, _, _, call = record
        if at >= seq:
            break
        if (kind == "turn.completed" and turn_id is not None) or (
                call == call_id and kind in ("tool_call.started", "tool_call.completed")):
            newest = record
    if newest is not None:
        return newest[1] == "tool_call.started" and (newest[3] or "") == (session_id or "")
    return pruned and (turn_id is None or not any(k == "turn.started" for _, k, *_ in calls))


def provenance_problem(seq: int, turn_id: str | None, session_id: str | None,
                       data: dict[str, Any], calls: list[Call], pruned: bool) -> str | None:
    """What is wrong with a memory entry's provenance, if anything. ``calls`` as for
    :func:`call_running`, for the entry's turn (or the calls outside a turn)."""
    origin, call = data.get("origin"), data.get("tool_call_id")
    if origin is not None and origin not in MEMORY_ORIGINS:
        return f"names an unknown origin {str(origin)[:40]!r}"
    if call is not None:
        if origin not in (None, "tool"):
            return f"names tool call {str(call)[:80]} but says it came from the {origin}"
        if not isinstance(call, str) or not call_running(seq, turn_id, session_id, call,
                                                          calls, pruned):
            where = f"turn {turn_id}" if turn_id is not None else "no turn"
            return (f"names tool call {str(call)[:80]} of {where}, which the chain does not "
                    "show running there when the entry was written")
        return None
    if origin == "tool":
        return "says it came from a tool call but names none"
    if origin is not None and turn_id is not None:
        return f"says it came from the {origin} but names turn {turn_id}"
    return None


def _calls(conn: Any, d: Dialect, turns: set[str], direct: set[str]) -> dict[str | None,
                                                                           list[Call]]:
    """The entries :func:`call_running` reads: by turn, and (under ``None``) those of
    calls outside a turn naming ``direct``."""
    found: dict[str | None, list[Call]] = {None: []}
    for chunk in chunks(sorted(turns)):
        for seq, kind, turn, session, call in conn.execute(
                f"SELECT seq, kind, turn_id, session_id, {d.text('tool_call_id')} "
                f"FROM audit_log WHERE turn_id IN ({d.phs(len(chunk))}) AND kind IN "
                "('tool_call.started', 'tool_call.completed', 'turn.started', 'turn.completed') "
                "ORDER BY seq",
                chunk):
            found.setdefault(turn, []).append((int(seq), kind, turn, session, call))
    for chunk in chunks(sorted(direct)):
        for seq, _, kind, _, _, session, data_json, *_ in conn.execute(
                direct_calls(d, len(chunk)), chunk):  # chain.ENTRY_COLUMNS
            call = entry_data(data_json, int(seq)).get("tool_call_id")
            found[None].append((int(seq), str(kind), None, session, call))
    return found


def check(conn: Any, d: Dialect) -> tuple[int | None, str] | None:
    """What is wrong with the memory tables on ``conn`` (either backend's), if
    anything: ``(seq, problem)`` naming the entry a row disagrees with, or
    ``(None, problem)`` for a row no entry records."""
    kinds = ", ".join(f"'{k}'" for k in MEMORY_KINDS)
    expected: dict[Key, tuple[int, str, tuple[Any, ...]]] = {}
    written: list[tuple[int, str, str | None, str | None, dict[str, Any]]] = []
    for seq, kind, turn_id, session_id, data_json in conn.execute(
            f"SELECT seq, kind, turn_id, session_id, data FROM audit_log WHERE kind IN "
            f"({kinds}) AND {KIND_INDEXED} ORDER BY seq"):
        data = entry_data(data_json, int(seq))
        key, said = _expected(kind, turn_id, session_id, data)
        expected[key] = (int(seq), kind, said)
        written.append((int(seq), kind, turn_id, session_id, data))
    pruned_to = conn.execute(f"SELECT max({d.text('removed_to_at')}) FROM audit_log "
                             f"WHERE kind = 'ledger.pruned' AND {KIND_INDEXED}").fetchone()[0]
    calls = _calls(conn, d, {t for _, _, t, _, data in written
                             if t is not None and data.get("tool_call_id") is not None},
                   {str(data["tool_call_id"]) for _, _, t, _, data in written
                    if t is None and data.get("tool_call_id") is not None})
    for seq, kind, turn_id, session_id, data in written:
        problem = provenance_problem(seq, turn_id, session_id, data,
                                     calls.get(turn_id, []), pruned_to is not None)
        if problem is not None:
            return seq, f"entry {seq} ({kind}) {problem}"
    for table, statement in _READS.items():
        noun = _NOUN[table]
        for row in conn.execute(statement):
            row_id, created, said, consistent = _actual(table, tuple(row))
            recorded = expected.pop((table, row_id), None)
            if recorded is None:
                if pruned_to is not None and str(created) <= pruned_to:
                    continue  # its entry went with a recorded prune
                return None, (f"the {noun} {row_id} is in the memory tables but on no entry "
                              "of the chain")
            seq, kind, want = recorded
            if said != want or not consistent:
                return seq, f"the {noun} {row_id} does not match entry {seq} ({kind})"
    if expected:
        (table, row_id), (seq, kind, _) = min(expected.items(), key=lambda item: item[1][0])
        return seq, f"entry {seq} ({kind}) records the {_NOUN[table]} {row_id}, which is gone"
    return None


def verified(report: VerifyReport, conn: Any, d: Dialect) -> VerifyReport:
    """``report``, failed if the memory tables on ``conn`` disagree with the chain."""
    if not report.ok:
        return report
    found = check(conn, d)
    if found is None:
        return report
    seq, problem = found
    return dataclasses.replace(report, ok=False, bad_seq=seq, problem=problem,
                               memory_bad=True)
