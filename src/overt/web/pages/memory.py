"""The Memory pages: search, one node with its revisions and links, a graph in SVG.

``/memory/ID`` shows the revision ``ID`` as it was written (an old revision's
own body, not the current one), a line diff against the revision before it, and
what wrote it (:mod:`overt.memory.provenance`): the turn and tool call, linked to
the turn's timeline, or the API or CLI.

``memory.read`` opens them; a node another actor wrote is shown only with
``memory.read_cross_actor``, as the memory tools decide (nodes the viewer may
not read are left out of results and graphs, and a node page answers 404).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from overt.memory.graph import neighbors
from overt.memory.provenance import history
from overt.memory.store import MemoryStore, Node, store_for
from overt.runtime import Runtime
from overt.web import svg
from overt.web.auth import Login
from overt.web.diff import line_diff
from overt.web.render import page, unknown_query
from overt.web.viewer import MEMORY, Viewer

RESULTS = 50
GRAPH_NODES = 24


class MemoryPage:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def store(self) -> MemoryStore:
        return store_for(self.runtime.ledger)

    async def search(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(MEMORY):
            return page("denied.html", viewer, login, active="memory", status=403,
                        capability=MEMORY)
        if problem := unknown_query(request, ("q", "kind")):
            return page("denied.html", viewer, login, active="memory", status=422,
                        capability=None, message=problem)
        query = request.query_params.get("q", "").strip()
        kind = request.query_params.get("kind", "").strip() or None
        hits = [h for h in await self.store.search(query, kind=kind, limit=RESULTS)
                if viewer.sees_memory_of(h.node.actor)]
        nodes, links = await self.store.graph(GRAPH_NODES * 4)
        shown = [n for n in nodes if viewer.sees_memory_of(n.actor)][:GRAPH_NODES]
        picture = _picture(shown, [(lk.from_id, lk.to_id, lk.kind) for lk in links],
                           "the newest memory nodes and their links")
        return page("memory.html", viewer, login, active="memory", query=query,
                    kind=kind or "", hits=hits, graph=picture, searched="q" in
                    request.query_params)

    async def node(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(MEMORY):
            return page("denied.html", viewer, login, active="memory", status=403,
                        capability=MEMORY)
        found = await self.store.node(request.path_params["node_id"])
        if found is None or not viewer.sees_memory_of(found.actor):
            return page("denied.html", viewer, login, active="memory", status=404,
                        capability=None, message="no such memory node")
        revisions = await history(self.store, found.root_id)
        shown = next(r for r in revisions if r.node.id == found.id)
        current = revisions[-1].node
        before = [r for r in revisions if r.node.revision < found.revision]
        previous = before[-1] if before else None
        change = None
        if previous is not None and viewer.sees_memory_of(previous.node.actor):
            change = line_diff(previous.node.body, found.body)
        named = current if viewer.sees_memory_of(current.actor) else found
        hood = await neighbors(self.store, current, 1)
        near = {root: n for root, n in hood.nodes.items() if viewer.sees_memory_of(n.actor)}
        links = [lk for lk in hood.links if lk.from_id in near and lk.to_id in near]
        picture = _picture(list(near.values()), [(lk.from_id, lk.to_id, lk.kind)
                                                 for lk in links],
                           f"links of {named.title}", center=current.root_id)
        return page("node.html", viewer, login, active="memory", node=found,
                    current=current, shown=shown, previous=previous, change=change,
                    revisions=revisions, links=links, near=near, graph=picture)


def _picture(nodes: list[Node], links: list[tuple[str, str, str]], title: str,
             center: str | None = None) -> object:
    return svg.graph([(n.root_id, n.title, f"/memory/{n.id}") for n in nodes], links,
                     title=title, center=center)
