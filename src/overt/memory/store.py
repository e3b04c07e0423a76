"""Reads and writes of the memory graph over a ledger, on SQLite or PostgreSQL.

Writes go through :meth:`Ledger.record`: the ``node.*`` / ``link.*`` event and
the memory row are one transaction, so a node never exists without its record. On
PostgreSQL the row goes in through the owner's ``overt_write_<table>``, which
refuses a row its entry does not record (:mod:`overt.ledger.schema.derived`): the
writer role has no ``INSERT`` on the memory tables.
Reads are the ledger's typed reads of these tables (:mod:`overt.ledger.reads.memory`):
no SQL is written here. Only full-text search differs by backend
(:mod:`overt.ledger.reads.memory_search`).

Search ordering, on both backends: relevance first, then newer ``created_at``
first, then the larger id. Relevance grows with each query word's occurrences,
a title's counting twice a body's, and levels off as they repeat; neither
backend weighs a node's length. SQLite: BM25 with ``k1 = 1.2`` and ``b = 0``
(FTS5's ``bm25`` over an index without per-node lengths, weights from
:func:`~overt.ledger.reads.memory_search.sqlite_weights`), rarer words weighing more;
PostgreSQL: ``ts_rank`` with title weight A = 1.0 and body weight B = 0.5.
(SQLite picks the top ``limit`` inside its index, where a tie goes to the node
indexed later, which is the newer one within a ledger.) Query words are
lower-cased, split on anything but letters and digits, stripped of common
English stop words and matched with OR, stemmed (porter / english). Only
current revisions are found. Scores are comparable within one backend only.
After the word matches, when they are fewer than asked for, come the nodes that
hold a word of three characters or more inside their text (``kron`` in
``Isokron``), each with score 0 (:func:`~overt.ledger.reads.memory_search.fragments`).

A search within one actor's memory (the default of ``node_search``) reads only
that actor's part of the index (see :mod:`overt.ledger.schema.memory_search`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
from overt.ledger.reads import memory as reads
from overt.ledger.reads.base import readable
from overt.ledger.reads.memory_search import tags
from overt.memory.nodes import Hit, Link, Node

__all__ = ["Hit", "Link", "MemoryStore", "Node", "Writer", "store_for"]


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


class MemoryStore:
    """The memory graph in one ledger. Build with :func:`store_for`."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # -- reads ----------------------------------------------------------------

    async def node(self, node_id: str) -> Node | None:
        """The revision ``node_id``, current or not."""
        return await reads.node(self.ledger, node_id)

    async def current(self, root_id: str) -> Node | None:
        """The newest revision of the chain that starts at ``root_id``."""
        return await reads.current(self.ledger, root_id)

    async def currents(self, root_ids: Sequence[str]) -> dict[str, Node]:
        """The current revision of each chain, by root id."""
        return await reads.currents(self.ledger, root_ids)

    async def history(self, root_id: str) -> list[Node]:
        """Every revision of the chain, oldest first."""
        return await reads.revisions(self.ledger, root_id)

    async def search(self, query: str, *, kind: str | None = None, actor: str | None = None,
                     limit: int = 10) -> list[Hit]:
        """Current revisions matching ``query`` (see the module docstring for the
        ordering), of ``kind`` and written by ``actor`` when given. An empty query
        lists the newest nodes; one of stop words only finds nothing."""
        return await reads.search(self.ledger, query, kind=kind, actor=actor, limit=limit)

    async def link(self, link_id: str) -> Link | None:
        """The link ``link_id``, saying whether it was retracted."""
        return await reads.link(self.ledger, link_id)

    async def links_touching(self, root_ids: Sequence[str]) -> list[Link]:
        """Links in force (not retracted) from or to any of ``root_ids``, oldest first."""
        return await reads.links_touching(self.ledger, root_ids)

    async def graph(self, limit: int = 500) -> tuple[list[Node], list[Link]]:
        """The newest ``limit`` current nodes and the links in force among them."""
        nodes = await reads.newest_nodes(self.ledger, limit)
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
            "origin": node.origin, "search_tags": tags(node.kind, node.actor)}


def store_for(ledger: Ledger) -> MemoryStore:
    """The memory of ``ledger``.

    Raises:
        UsageError: the ledger cannot be read by the memory (not a built-in backend).
    """
    if not readable(ledger):
        raise UsageError(f"ledger {type(ledger).__name__} does not hold memory "
                         "(the SQLite and PostgreSQL ledgers do)")
    return MemoryStore(ledger)
