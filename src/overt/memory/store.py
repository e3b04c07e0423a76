"""Reads and writes of the memory graph over a ledger, on SQLite or PostgreSQL.

Writes go through :meth:`Ledger.record`: the ``node.*`` / ``link.*`` event and
the memory row are one transaction, so a node never exists without its record. On
PostgreSQL the row goes in through the owner's ``overt_write_<table>``, which
refuses a row its entry does not record (:mod:`overt.ledger.schema.derived`): the
writer role has no ``INSERT`` on the memory tables.
Reads go through the ledger's own connection (``select``). The SQL is written
once over a :class:`~overt.ledger.sql.Dialect`; only full-text search differs
by backend (:mod:`overt.memory.search_sql`).

Search ordering, on both backends: relevance first, then newer ``created_at``
first, then the larger id. Relevance grows with each query word's occurrences,
a title's counting twice a body's, and levels off as they repeat; neither
backend weighs a node's length. SQLite: BM25 with ``k1 = 1.2`` and ``b = 0``
(FTS5's ``bm25`` over an index without per-node lengths, weights from
:func:`~overt.memory.search_sql.sqlite_weights`), rarer words weighing more;
PostgreSQL: ``ts_rank`` with title weight A = 1.0 and body weight B = 0.5.
(SQLite picks the top ``limit`` inside its index, where a tie goes to the node
indexed later, which is the newer one within a ledger.) Query words are
lower-cased, split on anything but letters and digits, stripped of common
English stop words and matched with OR, stemmed (porter / english). Only
current revisions are found. Scores are comparable within one backend only.
After the word matches, when they are fewer than asked for, come the nodes that
hold a word of three characters or more inside their text (``kron`` in
``Isokron``), each with score 0 (:func:`~overt.memory.search_sql.fragments`).

A search within one actor's memory (the default of ``node_search``) reads only
that actor's part of the index (see :mod:`overt.ledger.schema.memory_search`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from overt.clock import now_iso
from overt.errors import UsageError
from overt.events import (
    MEMORY_ORIGINS,
    Event,
    LinkCreated,
    LinkRetracted,
    MemoryOrigin,
    NodeCreated,
    NodeSuperseded,
)
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.ledger.sql import POSTGRES, SQLITE, Dialect
from overt.memory import search_sql

NODE_COLUMNS = ("id, kind, title, body, actor, created_at, supersedes, root_id, revision, "
                "turn_id, session_id, tool_call_id, origin")
LINK_COLUMNS = ("id, kind, from_id, to_id, actor, created_at, turn_id, session_id, "
                "tool_call_id, origin")


@dataclass(frozen=True, slots=True)
class Node:
    """One revision of a memory node, and what wrote it: ``origin`` (``tool``,
    ``api``, ``cli``; ``None`` when it was written before origins were recorded),
    the tool call (``tool_call_id``) and the turn and session it ran in."""

    id: str
    kind: str
    title: str
    body: str
    actor: str
    created_at: str
    supersedes: str | None
    root_id: str
    revision: int
    turn_id: str | None = None
    session_id: str | None = None
    tool_call_id: str | None = None
    origin: MemoryOrigin | None = None

    def to_dict(self, *, body_limit: int | None = None) -> dict[str, Any]:
        """As JSON for a tool result; ``body_limit`` shortens long bodies (and says so)."""
        out: dict[str, Any] = {
            "id": self.id, "kind": self.kind, "title": self.title, "body": self.body,
            "actor": self.actor, "created_at": self.created_at, "supersedes": self.supersedes,
            "root_id": self.root_id, "revision": self.revision,
        }
        if body_limit is not None and len(self.body) > body_limit:
            out["body"] = self.body[:body_limit] + "…"
            out["body_truncated"] = True
        return out


@dataclass(frozen=True, slots=True)
class Link:
    """A typed link from one node chain to another (``from_id`` / ``to_id`` are root ids),
    and what wrote it (as for :class:`Node`)."""

    id: str
    kind: str
    from_id: str
    to_id: str
    actor: str
    created_at: str
    retracted: bool = False
    turn_id: str | None = None
    session_id: str | None = None
    tool_call_id: str | None = None
    origin: MemoryOrigin | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "from_id": self.from_id, "to_id": self.to_id,
                "actor": self.actor, "created_at": self.created_at}


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the current revision and its relevance (higher is better;
    0 when the search had no query words)."""

    node: Node
    score: float


@dataclass(frozen=True, slots=True)
class Writer:
    """Who writes, and from where: stamped on rows and events.

    ``origin="tool"``: a tool call, named by ``tool_call_id`` (the id its
    ``tool_call.started`` entry records), in turn ``turn_id`` of ``session_id``
    (both ``None`` for a call made outside a turn). The call must be running when
    the write is recorded: ``verify`` (and, on PostgreSQL, the database) refuses a
    write that names a call the chain does not show in progress. ``"api"`` (the
    default) and ``"cli"``: a write from outside any turn, naming neither a turn
    nor a tool call; ``session_id`` may label it (``"seed:memory"``).

    Raises:
        UsageError: an unknown origin, a tool write without its call, or a turn or
            tool call named by a write that did not come from a tool.
    """

    actor: str
    turn_id: str | None = None
    session_id: str | None = None
    tool_call_id: str | None = None
    origin: MemoryOrigin = "api"

    def __post_init__(self) -> None:
        if self.origin not in MEMORY_ORIGINS:
            raise UsageError(f"a memory write's origin is one of {', '.join(MEMORY_ORIGINS)}, "
                             f"not {self.origin!r}")
        if self.origin == "tool" and not self.tool_call_id:
            raise UsageError("a memory write from a tool names its tool call (tool_call_id)")
        if self.origin != "tool" and (self.turn_id or self.tool_call_id):
            raise UsageError(f"a memory write from the {self.origin} names no turn and no "
                             "tool call: only a tool call's write is part of a turn")

    def stamp(self) -> dict[str, Any]:
        """The provenance fields of a row and of its event."""
        return {"turn_id": self.turn_id, "session_id": self.session_id,
                "tool_call_id": self.tool_call_id, "origin": self.origin}


@runtime_checkable
class MemoryLedger(Protocol):
    """What the store needs of a ledger beyond :class:`Ledger`: its backend's name
    and plain reads of the tables beside the chain (both built-in ledgers have them)."""

    backend: str

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...


def node_from_row(row: Sequence[Any]) -> Node:
    """A node revision from a row of :data:`NODE_COLUMNS`."""
    return Node(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], int(row[8]),
                row[9], row[10], row[11], row[12])


def _link(row: Sequence[Any], retracted: bool = False) -> Link:
    return Link(row[0], row[1], row[2], row[3], row[4], row[5], retracted, row[6], row[7],
                row[8], row[9])


class MemoryStore:
    """The memory graph in one ledger. Build with :func:`store_for`."""

    def __init__(self, ledger: Ledger, reader: MemoryLedger, dialect: Dialect) -> None:
        self.ledger = ledger
        self._reader = reader
        self._d = dialect

    @property
    def dialect(self) -> Dialect:
        """The SQL dialect of the ledger's backend."""
        return self._d

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of a plain read of the ledger's tables (``dialect``'s placeholders)."""
        return await self._reader.select(statement, params)

    # -- reads ----------------------------------------------------------------

    async def node(self, node_id: str) -> Node | None:
        """The revision ``node_id``, current or not."""
        rows = await self.select(f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE id = "
                                f"{self._d.ph}", (node_id,))
        return node_from_row(rows[0]) if rows else None

    async def current(self, root_id: str) -> Node | None:
        """The newest revision of the chain that starts at ``root_id``."""
        rows = await self.select(f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE root_id = "
                                f"{self._d.ph} ORDER BY revision DESC LIMIT 1", (root_id,))
        return node_from_row(rows[0]) if rows else None

    async def currents(self, root_ids: Sequence[str]) -> dict[str, Node]:
        """The current revision of each chain, by root id."""
        if not root_ids:
            return {}
        rows = await self.select(
            f"SELECT {NODE_COLUMNS} FROM memory_nodes n WHERE n.root_id IN "
            f"({self._d.phs(len(root_ids))}) AND {search_sql.CURRENT}", tuple(root_ids))
        return {node.root_id: node for node in map(node_from_row, rows)}

    async def history(self, root_id: str) -> list[Node]:
        """Every revision of the chain, oldest first."""
        rows = await self.select(f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE root_id = "
                                f"{self._d.ph} ORDER BY revision", (root_id,))
        return [node_from_row(r) for r in rows]

    async def search(self, query: str, *, kind: str | None = None, actor: str | None = None,
                     limit: int = 10) -> list[Hit]:
        """Current revisions matching ``query`` (see the module docstring for the
        ordering), of ``kind`` and written by ``actor`` when given. An empty query
        lists the newest nodes; one of stop words only finds nothing."""
        terms = search_sql.words(query)
        if query.strip() and not terms:
            return []  # only stop words: nothing would rank, and listing everything misleads
        weights = search_sql.PLAIN_WEIGHTS
        prefixes: set[str] = set()
        if terms and self._d is SQLITE:
            averages = await self.select(search_sql.SQLITE_AVERAGES)
            weights = search_sql.sqlite_weights(averages[0][0] if averages else None)
            candidates = [t for t in terms if search_sql.may_be_prefix(t)]
            if candidates:  # a word not found whole is matched as a prefix
                whole = (await self.select(*search_sql.sqlite_found_whole(candidates, actor)))[0]
                prefixes = {t for t, found in zip(candidates, whole, strict=True) if not found}
        statement, params = search_sql.search(self._d, terms, kind=kind, actor=actor,
                                              limit=limit, columns=NODE_COLUMNS, weights=weights,
                                              prefixes=prefixes)
        hits = [Hit(node_from_row(r), float(r[13])) for r in await self.select(statement, params)]
        inside = search_sql.fragment_terms(terms)
        if inside and len(hits) < limit:  # text inside words fills what words leave
            statement, params = search_sql.fragments(
                self._d, inside, kind=kind, actor=actor, limit=limit - len(hits),
                columns=NODE_COLUMNS, skip=[h.node.id for h in hits])
            hits += [Hit(node_from_row(r), 0.0) for r in await self.select(statement, params)]
        return hits

    async def link(self, link_id: str) -> Link | None:
        """The link ``link_id``, saying whether it was retracted."""
        rows = await self.select(
            f"SELECT {', '.join('l.' + c.strip() for c in LINK_COLUMNS.split(','))}, "
            f"r.link_id FROM memory_links l LEFT JOIN memory_link_retractions r "
            f"ON r.link_id = l.id WHERE l.id = {self._d.ph}", (link_id,))
        if not rows:
            return None
        return _link(rows[0], retracted=rows[0][10] is not None)

    async def links_touching(self, root_ids: Sequence[str]) -> list[Link]:
        """Links in force (not retracted) from or to any of ``root_ids``, oldest first."""
        if not root_ids:
            return []
        ids = self._d.phs(len(root_ids))
        rows = await self.select(
            f"SELECT {LINK_COLUMNS} FROM memory_links l WHERE (l.from_id IN ({ids}) "
            f"OR l.to_id IN ({ids})) AND NOT EXISTS (SELECT 1 FROM memory_link_retractions r "
            "WHERE r.link_id = l.id) ORDER BY l.created_at, l.id", (*root_ids, *root_ids))
        return [_link(r) for r in rows]

    async def graph(self, limit: int = 500) -> tuple[list[Node], list[Link]]:
        """The newest ``limit`` current nodes and the links in force among them."""
        rows = await self.select(
            f"SELECT {NODE_COLUMNS} FROM memory_nodes n WHERE {search_sql.CURRENT} "
            f"ORDER BY n.created_at DESC, n.id DESC LIMIT {int(limit)}")
        nodes = [node_from_row(r) for r in rows]
        roots = {n.root_id for n in nodes}
        links = [link for link in await self.links_touching(sorted(roots))
                 if link.from_id in roots and link.to_id in roots]
        return nodes, links

    # -- writes ---------------------------------------------------------------

    async def create_node(self, kind: str, title: str, body: str, writer: Writer,
                          *, also: Sequence[Event] = ()) -> Node:
        """Write the first revision of a node, with its ``node.created`` record
        (and ``also``, in the same transaction).

        Raises:
            LedgerError: nothing was written.
        """
        node_id = new_ulid()
        node = Node(node_id, kind, title, body, writer.actor, now_iso(), None, node_id, 1,
                    **writer.stamp())
        event = NodeCreated(node_id=node_id, node_kind=kind, actor=writer.actor,
                            title_digest=digest_text(title), body_digest=digest_text(body),
                            **writer.stamp())
        await self.ledger.record([*also, event], rows=[("memory_nodes", _node_row(node))])
        return node

    async def supersede(self, previous: Node, title: str, body: str, writer: Writer,
                        *, also: Sequence[Event] = ()) -> Node:
        """Write a new revision replacing ``previous`` (same kind), with its
        ``node.superseded`` record.

        Raises:
            LedgerError: nothing was written (also when ``previous`` was superseded
                meanwhile: a revision is superseded at most once).
        """
        node = Node(new_ulid(), previous.kind, title, body, writer.actor, now_iso(),
                    previous.id, previous.root_id, previous.revision + 1, **writer.stamp())
        event = NodeSuperseded(
            node_id=node.id, supersedes=previous.id, root_id=node.root_id,
            revision=node.revision, node_kind=node.kind, actor=writer.actor,
            title_digest=digest_text(title), body_digest=digest_text(body), **writer.stamp())
        await self.ledger.record([*also, event], rows=[("memory_nodes", _node_row(node))])
        return node

    async def create_link(self, kind: str, from_root: str, to_root: str, writer: Writer,
                          *, also: Sequence[Event] = ()) -> Link:
        """Write a link between two node chains, with its ``link.created`` record.

        Raises:
            LedgerError: nothing was written.
        """
        link = Link(new_ulid(), kind, from_root, to_root, writer.actor, now_iso(),
                    **writer.stamp())
        event = LinkCreated(link_id=link.id, link_kind=kind, from_id=from_root, to_id=to_root,
                            actor=writer.actor, **writer.stamp())
        row = {**link.to_dict(), **writer.stamp()}
        await self.ledger.record([*also, event], rows=[("memory_links", row)])
        return link

    async def retract_link(self, link: Link, writer: Writer,
                           *, also: Sequence[Event] = ()) -> None:
        """Record that ``link`` no longer holds (the link row stays).

        Raises:
            LedgerError: nothing was written (also when it was already retracted).
        """
        event = LinkRetracted(link_id=link.id, link_kind=link.kind, actor=writer.actor,
                              **writer.stamp())
        row = {"link_id": link.id, "actor": writer.actor, "created_at": now_iso(),
               **writer.stamp()}
        await self.ledger.record([*also, event], rows=[("memory_link_retractions", row)])


def _node_row(node: Node) -> dict[str, Any]:
    return {"id": node.id, "kind": node.kind, "title": node.title, "body": node.body,
            "actor": node.actor, "created_at": node.created_at, "supersedes": node.supersedes,
            "root_id": node.root_id, "revision": node.revision, "turn_id": node.turn_id,
            "session_id": node.session_id, "tool_call_id": node.tool_call_id,
            "origin": node.origin, "search_tags": search_sql.tags(node.kind, node.actor)}


def store_for(ledger: Ledger) -> MemoryStore:
    """The memory of ``ledger``.

    Raises:
        UsageError: the ledger cannot be read by the memory (not a built-in backend).
    """
    if not isinstance(ledger, MemoryLedger) or ledger.backend not in ("sqlite", "postgres"):
        raise UsageError(f"ledger {type(ledger).__name__} does not hold memory "
                         "(the SQLite and PostgreSQL ledgers do)")
    return MemoryStore(ledger, ledger, SQLITE if ledger.backend == "sqlite" else POSTGRES)
