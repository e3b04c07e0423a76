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
"""

from __future__ import annotations

import dataclasses
from typing import Any

from overt.ledger.base import VerifyReport
from overt.ledger.canonical import digest_text
from overt.ledger.chain import entry_data
from overt.ledger.sql import KIND_INDEXED, Dialect
from overt.memory.search_sql import tags

MEMORY_KINDS = ("node.created", "node.superseded", "link.created", "link.retracted")
"""The kinds of entry that record a row of the memory tables."""

_TABLE = {"node.created": "memory_nodes", "node.superseded": "memory_nodes",
          "link.created": "memory_links", "link.retracted": "memory_link_retractions"}

_NOUN = {"memory_nodes": "memory node", "memory_links": "memory link",
         "memory_link_retractions": "retraction of memory link"}

_READS = {
    "memory_nodes": ("SELECT id, kind, title, body, actor, created_at, supersedes, root_id, "
                     "revision, turn_id, search_tags FROM memory_nodes"),
    "memory_links": "SELECT id, kind, from_id, to_id, actor, created_at, turn_id FROM memory_links",
    "memory_link_retractions": ("SELECT link_id, actor, created_at, turn_id "
                                "FROM memory_link_retractions"),
}

Key = tuple[str, str]
"""(table, the row's id)"""


def _expected(kind: str, turn_id: str | None, data: dict[str, Any]) -> tuple[Key, tuple[Any, ...]]:
    """The row an entry records: its table and id, and what the row must say."""
    if kind == "node.created":
        node = str(data.get("node_id"))
        return ("memory_nodes", node), (
            data.get("node_kind"), data.get("title_digest"), data.get("body_digest"),
            data.get("actor"), None, node, 1, turn_id)
    if kind == "node.superseded":
        return ("memory_nodes", str(data.get("node_id"))), (
            data.get("node_kind"), data.get("title_digest"), data.get("body_digest"),
            data.get("actor"), data.get("supersedes"), data.get("root_id"),
            data.get("revision"), turn_id)
    if kind == "link.created":
        return ("memory_links", str(data.get("link_id"))), (
            data.get("link_kind"), data.get("from_id"), data.get("to_id"), data.get("actor"),
            turn_id)
    return ("memory_link_retractions", str(data.get("link_id"))), (data.get("actor"), turn_id)


def _actual(table: str, row: tuple[Any, ...]) -> tuple[str, str, tuple[Any, ...], bool]:
    """(id, created_at, what the row says as :func:`_expected` puts it, whether its
    derived columns are consistent) for a row read by :data:`_READS`."""
    if table == "memory_nodes":
        (node_id, kind, title, body, actor, created, supersedes, root, revision, turn,
         search_tags) = row
        said = (kind, digest_text(title), digest_text(body), actor, supersedes, root,
                int(revision), turn)
        return node_id, created, said, search_tags == tags(kind, actor)
    if table == "memory_links":
        link_id, kind, from_id, to_id, actor, created, turn = row
        return link_id, created, (kind, from_id, to_id, actor, turn), True
    link_id, actor, created, turn = row
    return link_id, created, (actor, turn), True


def check(conn: Any, d: Dialect) -> tuple[int | None, str] | None:
    """What is wrong with the memory tables on ``conn`` (either backend's), if
    anything: ``(seq, problem)`` naming the entry a row disagrees with, or
    ``(None, problem)`` for a row no entry records."""
    kinds = ", ".join(f"'{k}'" for k in MEMORY_KINDS)
    expected: dict[Key, tuple[int, str, tuple[Any, ...]]] = {}
    for seq, kind, turn_id, data_json in conn.execute(
            f"SELECT seq, kind, turn_id, data FROM audit_log WHERE kind IN ({kinds}) "
            f"AND {KIND_INDEXED} ORDER BY seq"):
        key, said = _expected(kind, turn_id, entry_data(data_json, int(seq)))
        expected[key] = (int(seq), kind, said)
    pruned_to = conn.execute(f"SELECT max({d.text('removed_to_at')}) FROM audit_log "
                             f"WHERE kind = 'ledger.pruned' AND {KIND_INDEXED}").fetchone()[0]
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
