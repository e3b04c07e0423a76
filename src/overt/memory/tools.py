"""The model-facing memory tools: nodes and links the agent writes, reads and revises.

``node_create``, ``node_read``, ``node_search``, ``node_supersede``,
``link_create``, ``link_retract``, ``node_neighbors``, ``node_history``. Every
answer is an envelope (:mod:`overt.memory.envelope`): invalid input (unknown
kind, missing field, dangling id, a link the rules forbid) comes back as
``{"ok": false, "error": {"code", "message"}}`` for the model to act on.

Nothing is overwritten: a revision supersedes the one before it, a retraction
is a new record. A node belongs to the actor who wrote its current revision;
touching another actor's node needs ``memory.read_cross_actor``
(:mod:`overt.memory.access`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from overt.errors import LedgerError
from overt.memory import access
from overt.memory.envelope import Envelope, error, ok
from overt.memory.graph import MAX_DEPTH, neighbors
from overt.memory.kinds import MemoryKinds
from overt.memory.store import Link, MemoryStore, Node, Writer, store_for
from overt.tools.base import Tool, ToolContext, make_tool

MAX_LIMIT = 50
TITLE_MAX = 200
BODY_MAX = 20_000
SNIPPET = 300


def _writer(ctx: ToolContext) -> Writer:
    return Writer(access.me(ctx), ctx.turn_id or None, ctx.session_id or None,
                  ctx.tool_call_id, origin="tool")


def _missing(**given: str | None) -> Envelope | None:
    absent = [name for name, value in given.items() if value is None or not value.strip()]
    if not absent:
        return _unstorable(**given)
    return error("missing_field", f"missing {', '.join(absent)}: give "
                 f"{'it' if len(absent) == 1 else 'them'} and call again", fields=absent)


def _unstorable(**given: str | None) -> Envelope | None:
    """Text neither backend holds as given: PostgreSQL refuses NUL (its lookup or write
    failed as a ledger error), and no UTF-8 encodes an unpaired surrogate."""
    bad = [name for name, value in given.items()
           if value is not None and ("\x00" in value or (not value.isascii()
                                     and not _encodes(value)))]
    if not bad:
        return None
    return error("invalid_argument", f"{', '.join(bad)} holds a NUL character or an unpaired "
                 "surrogate, which memory cannot store: remove it and call again", fields=bad)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _too_long(title: str | None, body: str | None) -> Envelope | None:
    if (problem := _unstorable(title=title, body=body)) is not None:
        return problem
    if title is not None and len(title) > TITLE_MAX:
        return error("too_long", f"title is {len(title)} characters; at most {TITLE_MAX}")
    if body is not None and len(body) > BODY_MAX:
        return error("too_long", f"body is {len(body)} characters; at most {BODY_MAX}: "
                     "split it into several nodes and link them")
    return None


def _no_node(node_id: str) -> Envelope:
    return error("not_found", f"no memory node {node_id!r}; find ids with node_search",
                 id=node_id)


class MemoryTools:
    """The tools over one set of kinds; :meth:`tools` builds them."""

    def __init__(self, kinds: MemoryKinds) -> None:
        self.kinds = kinds

    async def _resolve(self, store: MemoryStore, node_id: str) -> tuple[Node, Node] | None:
        """(the revision named, the current revision of its chain), or None."""
        node = await store.node(node_id)
        if node is None:
            return None
        current = await store.current(node.root_id)
        return node, current or node

    async def node_create(self, ctx: ToolContext, kind: str | None = None,
                          title: str | None = None, body: str | None = None) -> Envelope:
        """Store a new fact the operator tells you to remember, note or save, as a typed
        node in long-term memory (a Decision, Gotcha, Component, Ticket, Note, ...).
        Returns its id, to link it or revise it later.

        Args:
            kind: the node kind, one of the kinds listed.
            title: a short title (at most 200 characters), what a search will show.
            body: the full text of the fact.
        """
        problem = _missing(kind=kind, title=title, body=body) or _too_long(title, body)
        if problem is not None or kind is None or title is None or body is None:
            return problem or {}
        if kind not in self.kinds.node_kinds:
            return error("unknown_kind", f"unknown node kind {kind!r}",
                         known=list(self.kinds.node_kinds))
        denied = await access.may_write(ctx, "node_create")
        if denied is not None:
            return denied
        node = await store_for(ctx.ledger).create_node(kind, title.strip(), body, _writer(ctx))
        return ok(node=node.to_dict())

    async def node_read(self, ctx: ToolContext, id: str | None = None) -> Envelope:
        """Read a memory node by id. Always returns its current revision, and says when
        the id read was superseded by a newer one.

        Args:
            id: the node id.
        """
        if (problem := _missing(id=id)) is not None or id is None:
            return problem or {}
        found = await self._resolve(store_for(ctx.ledger), id)
        if found is None:
            return _no_node(id)
        _, current = found
        denied = await access.may_touch(ctx, {current.actor}, f"node_read {id}")
        if denied is not None:
            return denied
        return ok(node=current.to_dict(), requested_id=id, current_id=current.id,
                  superseded=current.id != id)

    async def node_search(self, ctx: ToolContext, query: str = "", kind: str | None = None,
                          scope: str = "own", limit: int = 10) -> Envelope:
        """Answer a question about something remembered (a host, a decision, a ticket)
        by searching long-term memory for its words, best matches first; current
        revisions only. With no query, the newest nodes.

        Args:
            query: words to look for in titles and bodies.
            kind: only nodes of this kind.
            scope: own (nodes you wrote, the default) or all (every actor's; needs the
                memory.read_cross_actor capability).
            limit: how many results, 1 to 50 (default 10).
        """
        if scope not in ("own", "all"):
            return error("invalid_argument", f"scope is own or all, not {scope!r}")
        if kind is not None and kind not in self.kinds.node_kinds:
            return error("unknown_kind", f"unknown node kind {kind!r}",
                         known=list(self.kinds.node_kinds))
        if limit < 1:
            return error("invalid_argument", f"limit must be 1 to {MAX_LIMIT}, got {limit}")
        if scope == "all":
            denied = await access.may_read_others(ctx, "node_search scope=all")
            if denied is not None:
                return denied
        store = store_for(ctx.ledger)
        capped = limit > MAX_LIMIT
        actor = access.me(ctx) if scope == "own" else None
        hits = await store.search(query, kind=kind, actor=actor, limit=min(limit, MAX_LIMIT))
        searched = query
        if not hits and "_" in query:
            # A small model writes its key words snake_case ("invoice_rounding_ticket"),
            # which the search takes for one key, matched as a phrase: none found, the
            # words are searched.
            searched = query.replace("_", " ")
            hits = await store.search(searched, kind=kind, actor=actor,
                                      limit=min(limit, MAX_LIMIT))
        answer = ok(results=[{**h.node.to_dict(body_limit=SNIPPET), "score": round(h.score, 6)}
                             for h in hits], count=len(hits), scope=scope)
        if searched != query:
            answer.update(searched=searched)
        if capped:
            answer.update(limit=MAX_LIMIT, limit_capped=True,
                          note=f"limit {limit} was capped to {MAX_LIMIT}")
        return answer

    async def node_supersede(self, ctx: ToolContext, id: str | None = None,
                             title: str | None = None, body: str | None = None) -> Envelope:
        """Revise a memory node: writes a new revision (same kind) that supersedes the
        current one; the old revision stays on the record. Give the id of the current
        revision, and a new title, a new body or both (what is not given is kept).

        Args:
            id: the id of the node's current revision.
            title: the new title (default: keep the current one).
            body: the new body (default: keep the current one).
        """
        if (problem := _missing(id=id)) is not None or id is None:
            return problem or {}
        if (title is None or not title.strip()) and (body is None or not body.strip()):
            return error("missing_field", "give a new title, a new body or both",
                         fields=["title", "body"])
        if (problem := _too_long(title, body)) is not None:
            return problem
        store = store_for(ctx.ledger)
        found = await self._resolve(store, id)
        if found is None:
            return _no_node(id)
        _, current = found
        if current.id != id:
            return _stale(id, current)
        denied = (await access.may_write(ctx, "node_supersede")
                  or await access.may_touch(ctx, {current.actor}, f"node_supersede {id}"))
        if denied is not None:
            return denied
        new_title = title.strip() if title and title.strip() else current.title
        new_body = body if body and body.strip() else current.body
        try:
            node = await store.supersede(current, new_title, new_body, _writer(ctx))
        except LedgerError:
            latest = await store.current(current.root_id)
            if latest is None or latest.id == current.id:
                raise
            return _stale(id, latest)  # another writer revised it first
        return ok(node=node.to_dict(), superseded_id=current.id)

    async def link_create(self, ctx: ToolContext, kind: str | None = None,
                          from_id: str | None = None, to_id: str | None = None) -> Envelope:
        """Link two memory nodes with a typed link (for example a Decision applies_to a
        Component, a Ticket depends_on another). Links follow nodes across revisions.

        Args:
            kind: the link kind, one of the kinds listed.
            from_id: the id of the node the link goes from.
            to_id: the id of the node the link goes to.
        """
        problem = _missing(kind=kind, from_id=from_id, to_id=to_id)
        if problem is not None or kind is None or from_id is None or to_id is None:
            return problem or {}
        if kind not in self.kinds.links:
            return error("unknown_link_kind", f"unknown link kind {kind!r}",
                         known=list(self.kinds.link_kinds))
        store = store_for(ctx.ledger)
        ends: list[Node] = []
        for end_id in (from_id, to_id):
            found = await self._resolve(store, end_id)
            if found is None:
                return _no_node(end_id)
            ends.append(found[1])
        source, target = ends
        if source.root_id == target.root_id:
            return error("invalid_argument", "a node cannot be linked to itself")
        if not self.kinds.allows(kind, source.kind, target.kind):
            allowed = self.kinds.targets(kind, source.kind)
            return error("link_not_allowed",
                         f"{kind} may not go from a {source.kind} to a {target.kind}; from a "
                         f"{source.kind} it may reach: {', '.join(allowed) or 'nothing'}",
                         allowed_targets=allowed)
        denied = (await access.may_write(ctx, "link_create")
                  or await access.may_touch(ctx, {source.actor, target.actor},
                                            f"link_create {from_id} {to_id}"))
        if denied is not None:
            return denied
        for link in await store.links_touching([source.root_id]):
            if (link.kind, link.from_id, link.to_id) == (kind, source.root_id, target.root_id):
                return ok(link=link.to_dict(), existing=True)
        link = await store.create_link(kind, source.root_id, target.root_id, _writer(ctx))
        return ok(link=link.to_dict(), existing=False)

    async def link_retract(self, ctx: ToolContext, id: str | None = None) -> Envelope:
        """Retract a link that no longer holds. It stays on the record but leaves the graph.

        Args:
            id: the link id.
        """
        if (problem := _missing(id=id)) is not None or id is None:
            return problem or {}
        store = store_for(ctx.ledger)
        link = await store.link(id)
        if link is None:
            return error("not_found", f"no memory link {id!r}; node_neighbors lists links",
                         id=id)
        if link.retracted:
            return error("already_retracted", f"link {id} was already retracted")
        denied = (await access.may_write(ctx, "link_retract")
                  or await access.may_touch(ctx, {link.actor}, f"link_retract {id}"))
        if denied is not None:
            return denied
        await store.retract_link(link, _writer(ctx))
        return ok(retracted=link.to_dict())

    async def node_neighbors(self, ctx: ToolContext, id: str | None = None,
                             depth: int = 1) -> Envelope:
        """The links in and out of a memory node and the nodes at their ends, one or two
        links away (nearest first, then oldest).

        Args:
            id: the node id.
            depth: 1 (direct links, the default) or 2 (also their links).
        """
        if (problem := _missing(id=id)) is not None or id is None:
            return problem or {}
        if depth not in (1, MAX_DEPTH):
            return error("invalid_argument", f"depth is 1 or {MAX_DEPTH}, not {depth}")
        store = store_for(ctx.ledger)
        found = await self._resolve(store, id)
        if found is None:
            return _no_node(id)
        start = found[1]
        denied = await access.may_touch(ctx, {start.actor}, f"node_neighbors {id}")
        if denied is not None:
            return denied
        hood = await neighbors(store, start, depth)
        nodes, links = dict(hood.nodes), hood.links
        others = {n.actor for n in nodes.values()} - {access.me(ctx)}
        hidden = 0
        if others and start.actor == access.me(ctx) and await access.may_read_others(
                ctx, f"node_neighbors {id} (others' nodes)") is not None:
            keep = {root for root, n in nodes.items() if n.actor == access.me(ctx)}
            hidden = len(nodes) - len(keep)
            nodes = {root: n for root, n in nodes.items() if root in keep}
            links = [li for li in links if li.from_id in keep and li.to_id in keep]
        return ok(node=start.to_dict(), depth=depth, links=_links(links, start),
                  nodes=[{**n.to_dict(body_limit=SNIPPET), "hops": hood.hops[n.root_id]}
                         for n in sorted(nodes.values(), key=lambda n: (
                             hood.hops[n.root_id], n.created_at, n.id))
                         if n.root_id != start.root_id],
                  hidden=hidden)

    async def node_history(self, ctx: ToolContext, id: str | None = None) -> Envelope:
        """Every revision of a memory node, oldest first (any revision's id will do).

        Args:
            id: the node id.
        """
        if (problem := _missing(id=id)) is not None or id is None:
            return problem or {}
        store = store_for(ctx.ledger)
        node = await store.node(id)
        if node is None:
            return _no_node(id)
        revisions = await store.history(node.root_id)
        denied = await access.may_touch(ctx, {r.actor for r in revisions}, f"node_history {id}")
        if denied is not None:
            return denied
        return ok(root_id=node.root_id, current_id=revisions[-1].id,
                  revisions=[r.to_dict() for r in revisions])

    def tools(self) -> list[Tool]:
        """The tools, their schemas naming the kinds this memory knows."""
        node_kinds, link_kinds = list(self.kinds.node_kinds), list(self.kinds.link_kinds)
        specs: list[tuple[Callable[..., Any], bool, Sequence[str], dict[str, list[str]]]] = [
            (self.node_create, False, ("kind", "title", "body"), {"kind": node_kinds}),
            (self.node_read, True, ("id",), {}),
            (self.node_search, True, (), {"kind": node_kinds, "scope": ["own", "all"]}),
            (self.node_supersede, False, ("id",), {}),
            (self.link_create, False, ("kind", "from_id", "to_id"), {"kind": link_kinds}),
            (self.link_retract, False, ("id",), {}),
            (self.node_neighbors, True, ("id",), {}),
            (self.node_history, True, ("id",), {}),
        ]
        built = []
        for function, read_only, required, enums in specs:
            made = make_tool(function, name=function.__name__, read_only=read_only,
                             capability="memory.read" if read_only else access.WRITE)
            built.append(_advertise(made, required, enums))
        return built


def _advertise(made: Tool, required: Sequence[str], enums: dict[str, list[str]]) -> Tool:
    """The tool with its schema saying what is required and which values are known.

    The function itself takes them as optional, so that a call without them is
    answered with a ``missing_field`` envelope rather than an argument error.
    """
    schema = dict(made.input_schema)
    properties = {name: dict(prop) for name, prop in schema.get("properties", {}).items()}
    for name, values in enums.items():
        prop = properties[name]
        prop.pop("anyOf", None)
        prop.pop("default", None)
        properties[name] = {"type": "string", "enum": values, **prop}
    for name in required:
        prop = properties[name]
        if "anyOf" in prop:
            prop.pop("anyOf")
            prop["type"] = "string"
        prop.pop("default", None)
    schema["properties"] = properties
    if required:
        schema["required"] = list(required)
    return dataclasses.replace(made, input_schema=schema)


def _links(links: Sequence[Link], start: Node) -> list[dict[str, Any]]:
    return [{**link.to_dict(),
             "direction": "out" if link.from_id == start.root_id
             else "in" if link.to_id == start.root_id else "beyond"} for link in links]


def _stale(node_id: str, current: Node) -> Envelope:
    return error("superseded", f"{node_id} is not the current revision: {current.id} "
                 "superseded it; read that one and revise it instead", current_id=current.id)


def memory_tools(kinds: MemoryKinds | None = None) -> list[Tool]:
    """The memory tools over ``kinds`` (default: the built-in kinds)."""
    return MemoryTools(kinds or MemoryKinds.builtin()).tools()
