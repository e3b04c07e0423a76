"""Who wrote this memory, and when: each node revision with the turn, tool call,
actor and session that wrote it, and the chain entry that records it.

A revision's provenance is on its row (``turn_id``, ``session_id``,
``tool_call_id``, ``origin``) and on the entry recording it (``node.created`` /
``node.superseded``), which ``verify`` holds equal; a write naming a tool call is
one the chain shows that call making while it ran (:mod:`overt.ledger.memory_check`).
So "where did this poisoned fact come from?" is answered by :func:`history` for a
node, and "what did this conversation plant?" by :func:`written_in` for a session
or a turn. ``overt memory history`` prints the first; a session's evidence bundle
carries the second (:mod:`overt.ledger.bundle`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from overt.errors import UsageError
from overt.ledger.reads import memory as memory_reads
from overt.ledger.reads import memory_provenance
from overt.memory.store import MemoryStore, Node


@dataclass(frozen=True, slots=True)
class Revision:
    """One revision of a memory node and what wrote it.

    ``seq`` and ``at``: the chain entry recording the revision and its time
    (``None`` when a prune removed it); ``tool_name``: the tool of the call that
    wrote it, from that call's ``tool_call.started`` (``None`` when no call wrote
    it, or the call's record is gone).
    """

    node: Node
    seq: int | None
    at: str | None
    tool_name: str | None

    @property
    def origin(self) -> str:
        """``tool``, ``api`` or ``cli``: where the write came from (its
        :class:`~overt.memory.store.Writer`'s origin, stamped on every row)."""
        return self.node.origin

    def provenance(self) -> dict[str, Any]:
        """What wrote it, as JSON."""
        n = self.node
        return {"origin": self.origin, "actor": n.actor, "turn_id": n.turn_id,
                "session_id": n.session_id, "tool_call_id": n.tool_call_id,
                "tool_name": self.tool_name, "seq": self.seq, "at": self.at,
                "created_at": n.created_at}

    def describe(self) -> str:
        """One line: who wrote it, from where, and the entry recording it."""
        n = self.node
        if self.origin == "tool":
            call = f"tool call {n.tool_call_id}"
            if self.tool_name:
                call += f" ({self.tool_name})"
            where = (f"in turn {n.turn_id}" if n.turn_id else "outside any turn")
            text = f"written by {n.actor} through {call} {where}"
        else:
            text = f"written by {n.actor} through the {self.origin}, in no turn"
        if n.session_id:
            text += f" of session {n.session_id}"
        if self.seq is not None:
            return f"{text}; entry {self.seq} at {self.at}"
        return f"{text}; its entry was pruned"


async def history(store: MemoryStore, node_id: str) -> list[Revision]:
    """Every revision of the node ``node_id`` belongs to (any revision's id will do),
    oldest first, with what wrote each; empty when there is no such node."""
    node = await store.node(node_id)
    if node is None:
        return []
    return await _revisions(store, await store.history(node.root_id))


async def written_in(store: MemoryStore, *, session_id: str | None = None,
                     turn_id: str | None = None) -> list[Revision]:
    """The node revisions written in a session or in one turn, oldest first, with
    what wrote each (the revisions of other chains they superseded are not included).

    Raises:
        UsageError: neither or both of ``session_id`` and ``turn_id`` given.
    """
    if (session_id is None) == (turn_id is None):
        raise UsageError("give a session or a turn, one of the two")
    nodes = await memory_reads.written_in(store.ledger, session_id=session_id,
                                          turn_id=turn_id)
    return await _revisions(store, nodes)


async def _revisions(store: MemoryStore, nodes: Sequence[Node]) -> list[Revision]:
    turns = [n.turn_id for n in nodes if n.turn_id is not None]
    written = await memory_provenance.turn_writes(store.ledger, turns)
    entries: dict[str, tuple[int, str]] = dict(written.records)  # node id -> (seq, at)
    tools = dict(written.tools)  # (turn, call id) -> tool name
    direct = [n.tool_call_id for n in nodes if n.turn_id is None and n.tool_call_id is not None]
    for call_id, name in (await memory_provenance.direct_call_tools(store.ledger,
                                                                    direct)).items():
        tools.setdefault((None, call_id), name)
    for node in nodes:
        if node.turn_id is None:  # a turn's were read above
            found = await memory_provenance.node_record(store.ledger, node.id)
            if found is not None:
                entries[node.id] = found
    out = []
    for node in nodes:
        seq, at = entries.get(node.id, (None, None))
        tool = (tools.get((node.turn_id, node.tool_call_id))
                if node.tool_call_id is not None else None)
        out.append(Revision(node, seq, at, tool))
    return out
