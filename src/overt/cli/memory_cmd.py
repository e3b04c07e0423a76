"""``overt memory``: read the agent's memory graph from the command line.

``search QUERY [--kind K] [--actor A]``, ``show ID``, ``history ID`` (every
revision, each with what wrote it: :mod:`overt.memory.provenance`) and
``graph [ID] --format dot|mermaid``. The operator reads every actor's memory
here, as with ``overt show`` for turns; nothing is written.

Attached by :mod:`overt.cli.main`: :func:`add_parser` adds the command,
:func:`run` runs it on an open ledger.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from overt.cli import flags
from overt.errors import NotFoundError, UsageError
from overt.ledger.base import Ledger
from overt.memory.graph import MAX_DEPTH, neighbors, to_dot, to_mermaid
from overt.memory.kinds import MemoryKinds
from overt.memory.provenance import Revision, history
from overt.memory.store import MemoryStore, Node, store_for
from overt.memory.tools import MAX_LIMIT
from overt.policy.actors import Actor

EXIT_OK = 0
GRAPH_LIMIT = 500


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``memory`` and its subcommands to ``sub`` (the top-level commands)."""
    memory = sub.add_parser("memory", help="the agent's memory graph: search, show, history, "
                                           "graph")
    msub = memory.add_subparsers(dest="memory_command", required=True, metavar="COMMAND")
    search = msub.add_parser("search", help="current nodes matching words, best first")
    search.add_argument("query")
    search.add_argument("--kind", help="only nodes of this kind (Decision, Note, ...)")
    search.add_argument("--actor", type=flags.actor,
                        help="only nodes this actor wrote (agent:default, ...)")
    search.add_argument("--limit", type=int, default=20, help=f"at most {MAX_LIMIT}")
    search.add_argument("--json", action="store_true")
    show = msub.add_parser("show", help="a node's current revision, and whether ID is it")
    show.add_argument("id", type=flags.node_id)
    show.add_argument("--json", action="store_true")
    revisions = msub.add_parser("history", help="every revision of a node, oldest first, "
                                                "each with the turn, tool call, actor and "
                                                "session that wrote it")
    revisions.add_argument("id", type=flags.node_id)
    revisions.add_argument("--json", action="store_true")
    graph = msub.add_parser("graph", help="the graph (or one node's neighbourhood) as dot or "
                                          "mermaid")
    graph.add_argument("id", nargs="?", type=flags.node_id,
                       help=f"draw this node's links only (default: the newest {GRAPH_LIMIT} "
                            "nodes)")
    graph.add_argument("--depth", type=int, default=MAX_DEPTH, choices=(1, MAX_DEPTH),
                       help="links away from ID (default 2)")
    graph.add_argument("--format", choices=("dot", "mermaid"), default="dot")


async def run(args: argparse.Namespace, ledger: Ledger,
              kinds: MemoryKinds | None = None) -> int:
    """Run ``overt memory ...`` on ``ledger``; ``kinds``: the configured node kinds.

    Raises:
        NotFoundError: no node has the id given.
        UsageError: a bad limit, actor or node kind, or the ledger holds no memory.
        LedgerError: the ledger cannot be read.
    """
    store = store_for(ledger)
    command = args.memory_command
    if command == "search":
        return await _search(store, args, kinds or MemoryKinds.builtin())
    node = await _node(store, args.id) if args.id else None
    if command == "show":
        assert node is not None
        current = await store.current(node.root_id) or node
        _print(args.json, {"node": current.to_dict(), "requested_id": node.id,
                           "superseded": current.id != node.id}, _text(current, node))
        return EXIT_OK
    if command == "history":
        assert node is not None
        revisions = await history(store, node.id)
        _print(args.json, {"revisions": [{**r.node.to_dict(), "provenance": r.provenance()}
                                         for r in revisions]},
               "\n\n".join(_text(r.node, written=r) for r in revisions))
        return EXIT_OK
    if node is None:
        nodes, links = await store.graph(GRAPH_LIMIT)
    else:
        hood = await neighbors(store, await store.current(node.root_id) or node, args.depth)
        nodes, links = list(hood.nodes.values()), hood.links
    print(to_dot(nodes, links) if args.format == "dot" else to_mermaid(nodes, links))
    return EXIT_OK


async def _search(store: MemoryStore, args: argparse.Namespace, kinds: MemoryKinds) -> int:
    if not 1 <= args.limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be 1 to {MAX_LIMIT}, got {args.limit}")
    # as the ledger names it: a bare "agent" is agent:default, an unknown kind refused
    actor = str(Actor.parse(args.actor)) if args.actor is not None else None
    hits = await store.search(args.query, kind=args.kind, actor=actor, limit=args.limit)
    if not hits and args.kind is not None and args.kind not in kinds.node_kinds:
        # a misspelt kind found nothing: said, not "no matching nodes" (a kind no longer
        # configured still finds the nodes that have it)
        raise UsageError(f"unknown node kind {args.kind!r} (known: "
                         f"{', '.join(kinds.node_kinds)})")
    rows = [f"{h.score:8.4f}  {h.node.id}  {h.node.kind:<18} {h.node.title}  "
            f"({h.node.actor}, rev {h.node.revision})" for h in hits]
    _print(args.json, {"results": [{**h.node.to_dict(), "score": h.score} for h in hits]},
           "\n".join(rows) or "no matching nodes")
    return EXIT_OK


async def _node(store: MemoryStore, node_id: str) -> Node:
    node = await store.node(node_id)
    if node is None:
        raise NotFoundError(f"no memory node {node_id!r}")
    return node


def _text(node: Node, requested: Node | None = None, written: Revision | None = None) -> str:
    lines = [f"{node.kind}: {node.title}",
             f"id {node.id}  revision {node.revision}  by {node.actor}  at {node.created_at}"]
    if node.supersedes:
        lines.append(f"supersedes {node.supersedes}")
    if written is not None:
        lines.append(written.describe())
    if requested is not None and requested.id != node.id:
        lines.append(f"({requested.id} was superseded; this is the current revision)")
    return "\n".join([*lines, "", node.body])


def _print(as_json: bool, data: dict[str, Any], text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2) if as_json else text)
