"""Walking the memory graph (neighbors, revision history) and drawing it (dot, mermaid)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from overt.memory.store import Link, MemoryStore, Node

MAX_DEPTH = 2


@dataclass(frozen=True, slots=True)
class Neighborhood:
    """A node's links in force up to ``depth`` hops, and the current revision of
    every node they reach (``nodes`` by root id, the start included)."""

    start: Node
    depth: int
    links: list[Link] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    hops: dict[str, int] = field(default_factory=dict)
    """Root id -> how many links from the start (0 for the start)."""


async def neighbors(store: MemoryStore, start: Node, depth: int = 1) -> Neighborhood:
    """The links in and out of ``start``'s chain, ``depth`` (1 or 2) hops out.

    Raises:
        ValueError: ``depth`` is not 1 or 2.
    """
    if depth not in (1, MAX_DEPTH):
        raise ValueError(f"depth must be 1 or {MAX_DEPTH}, got {depth}")
    hops = {start.root_id: 0}
    links: dict[str, Link] = {}
    frontier = [start.root_id]
    for hop in range(1, depth + 1):
        found = await store.links_touching(frontier)
        frontier = []
        for link in found:
            links.setdefault(link.id, link)
            for end in (link.from_id, link.to_id):
                if end not in hops:
                    hops[end] = hop
                    frontier.append(end)
        if not frontier:
            break
    nodes = await store.currents(sorted(hops))
    ordered = sorted(links.values(), key=lambda link: (link.created_at, link.id))
    return Neighborhood(start, depth, ordered, nodes, hops)


def verify_chain(revisions: Sequence[Node]) -> bool:
    """Whether ``revisions`` (oldest first) form one chain: revision numbers 1..n,
    each revision superseding the one before it."""
    for index, node in enumerate(revisions):
        expected = revisions[index - 1].id if index else None
        if node.revision != index + 1 or node.supersedes != expected:
            return False
    return True


def _label(node: Node) -> str:
    title = node.title if len(node.title) <= 60 else node.title[:59] + "…"
    return f"{node.kind}: {title}"


def to_dot(nodes: Sequence[Node], links: Sequence[Link]) -> str:
    """The graph as Graphviz dot (nodes named by root id)."""
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph memory {", "  rankdir=LR;", "  node [shape=box];"]
    lines += [f"  {quote(n.root_id)} [label={quote(_label(n))}];" for n in nodes]
    lines += [f"  {quote(link.from_id)} -> {quote(link.to_id)} [label={quote(link.kind)}];"
              for link in links]
    lines.append("}")
    return "\n".join(lines)


def to_mermaid(nodes: Sequence[Node], links: Sequence[Link]) -> str:
    """The graph as a Mermaid flowchart (node ids ``n`` + root id)."""
    def text(value: str) -> str:
        return value.replace('"', "#quot;")

    lines = ["flowchart LR"]
    lines += [f'  n{n.root_id}["{text(_label(n))}"]' for n in nodes]
    lines += [f"  n{link.from_id} -->|{text(link.kind)}| n{link.to_id}" for link in links]
    return "\n".join(lines)
