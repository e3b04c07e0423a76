"""The memory graph's tables read back: node revisions, links, full-text search.

The tables are written beside the entries that record them (:mod:`overt.memory.store`);
these reads go through the ledger's own connection. The SQL is written once over the
dialect; only full-text search differs by backend (:mod:`.memory_search`, whose
ordering rules :mod:`overt.memory.store` describes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from overt.ledger.reads import memory_search
from overt.ledger.reads.base import selecting
from overt.ledger.sql import SQLITE
from overt.memory.nodes import Hit, Link, Node

NODE_COLUMNS = ("id, kind, title, body, actor, created_at, supersedes, root_id, revision, "
                "turn_id, session_id, tool_call_id, origin")
LINK_COLUMNS = ("id, kind, from_id, to_id, actor, created_at, turn_id, session_id, "
                "tool_call_id, origin")


def node_from_row(row: Sequence[Any]) -> Node:
    """A node revision from a row of :data:`NODE_COLUMNS`."""
    return Node(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], int(row[8]),
                row[9], row[10], row[11], row[12])


def _link(row: Sequence[Any], retracted: bool = False) -> Link:
    return Link(row[0], row[1], row[2], row[3], row[4], row[5], retracted, row[6], row[7],
                row[8], row[9])


async def node(ledger: object, node_id: str) -> Node | None:
    """The revision ``node_id``, current or not.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE id = "
                               f"{d.ph}", (node_id,))
    return node_from_row(rows[0]) if rows else None


async def current(ledger: object, root_id: str) -> Node | None:
    """The newest revision of the chain that starts at ``root_id``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE root_id = "
                               f"{d.ph} ORDER BY revision DESC LIMIT 1", (root_id,))
    return node_from_row(rows[0]) if rows else None


async def currents(ledger: object, root_ids: Sequence[str]) -> dict[str, Node]:
    """The current revision of each chain, by root id.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    if not root_ids:
        return {}
    reader, d = selecting(ledger)
    rows = await reader.select(
        f"SELECT {NODE_COLUMNS} FROM memory_nodes n WHERE n.root_id IN "
        f"({d.phs(len(root_ids))}) AND {memory_search.CURRENT}", tuple(root_ids))
    return {found.root_id: found for found in map(node_from_row, rows)}


async def revisions(ledger: object, root_id: str) -> list[Node]:
    """Every revision of the chain that starts at ``root_id``, oldest first.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE root_id = "
                               f"{d.ph} ORDER BY revision", (root_id,))
    return [node_from_row(r) for r in rows]


async def written_in(ledger: object, *, session_id: str | None = None,
                     turn_id: str | None = None) -> list[Node]:
    """The node revisions whose rows name ``turn_id`` (when given) or else
    ``session_id``, oldest first (by creation time, then id).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    column, value = ("session_id", session_id) if turn_id is None else ("turn_id", turn_id)
    rows = await reader.select(
        f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE {column} = {d.ph} "
        "ORDER BY created_at, id", (value,))
    return [node_from_row(r) for r in rows]


async def newest_nodes(ledger: object, limit: int) -> list[Node]:
    """The newest ``limit`` current revisions (newer ``created_at`` first, then the
    larger id).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, _ = selecting(ledger)
    rows = await reader.select(
        f"SELECT {NODE_COLUMNS} FROM memory_nodes n WHERE {memory_search.CURRENT} "
        f"ORDER BY n.created_at DESC, n.id DESC LIMIT {int(limit)}")
    return [node_from_row(r) for r in rows]


async def search(ledger: object, query: str, *, kind: str | None = None,
                 actor: str | None = None, limit: int = 10) -> list[Hit]:
    """Current revisions matching ``query`` (ordered as :mod:`overt.memory.store`
    describes), of ``kind`` and written by ``actor`` when given. An empty query lists
    the newest nodes; one of stop words only finds nothing.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    terms = memory_search.words(query)
    if query.strip() and not terms:
        return []  # only stop words: nothing would rank, and listing everything misleads
    weights = memory_search.PLAIN_WEIGHTS
    prefixes: set[str] = set()
    if terms and d is SQLITE:
        averages = await reader.select(memory_search.SQLITE_AVERAGES)
        weights = memory_search.sqlite_weights(averages[0][0] if averages else None)
        candidates = [t for t in terms if memory_search.may_be_prefix(t)]
        if candidates:  # a word not found whole is matched as a prefix
            whole = (await reader.select(
                *memory_search.sqlite_found_whole(candidates, actor)))[0]
            prefixes = {t for t, found in zip(candidates, whole, strict=True) if not found}
    statement, params = memory_search.search(d, terms, kind=kind, actor=actor, limit=limit,
                                             columns=NODE_COLUMNS, weights=weights,
                                             prefixes=prefixes)
    hits = [Hit(node_from_row(r), float(r[13])) for r in await reader.select(statement, params)]
    inside = memory_search.fragment_terms(terms)
    if inside and len(hits) < limit:  # text inside words fills what words leave
        statement, params = memory_search.fragments(
            d, inside, kind=kind, actor=actor, limit=limit - len(hits),
            columns=NODE_COLUMNS, skip=[h.node.id for h in hits])
        hits += [Hit(node_from_row(r), 0.0) for r in await reader.select(statement, params)]
    return hits


async def link(ledger: object, link_id: str) -> Link | None:
    """The link ``link_id``, saying whether it was retracted.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    rows = await reader.select(
        f"SELECT {', '.join('l.' + c.strip() for c in LINK_COLUMNS.split(','))}, "
        f"r.link_id FROM memory_links l LEFT JOIN memory_link_retractions r "
        f"ON r.link_id = l.id WHERE l.id = {d.ph}", (link_id,))
    if not rows:
        return None
    return _link(rows[0], retracted=rows[0][10] is not None)


async def links_touching(ledger: object, root_ids: Sequence[str]) -> list[Link]:
    """Links in force (not retracted) from or to any of ``root_ids``, oldest first.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    if not root_ids:
        return []
    reader, d = selecting(ledger)
    ids = d.phs(len(root_ids))
    rows = await reader.select(
        f"SELECT {LINK_COLUMNS} FROM memory_links l WHERE (l.from_id IN ({ids}) "
        f"OR l.to_id IN ({ids})) AND NOT EXISTS (SELECT 1 FROM memory_link_retractions r "
        "WHERE r.link_id = l.id) ORDER BY l.created_at, l.id", (*root_ids, *root_ids))
    return [_link(r) for r in rows]
