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
from overt.ledger.chain import entry_data
from overt.ledger.schema.derived import MEMORY_ID
from overt.ledger.sql import KIND_INDEXED, chunks, direct_calls
from overt.memory.store import NODE_COLUMNS, MemoryStore, Node, node_from_row

_RECORDS = "('node.created', 'node.superseded')"


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
        """``tool``, ``api`` or ``cli``; ``tool`` for a revision recorded before
        origins were that names a tool call, ``unrecorded`` for one that names none."""
        if self.node.origin is not None:
            return self.node.origin
        return "tool" if self.node.tool_call_id is not None else "unrecorded"

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
        elif self.origin == "unrecorded":
            text = f"written by {n.actor}, from where not recorded (before provenance was)"
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
    column, value = ("session_id", session_id) if turn_id is None else ("turn_id", turn_id)
    rows = await store.select(
        f"SELECT {NODE_COLUMNS} FROM memory_nodes WHERE {column} = {store.dialect.ph} "
        "ORDER BY created_at, id", (value,))
    return await _revisions(store, [node_from_row(r) for r in rows])


async def _revisions(store: MemoryStore, nodes: Sequence[Node]) -> list[Revision]:
    d = store.dialect
    entries: dict[str, tuple[int, str]] = {}  # node id -> (seq, at)
    tools: dict[tuple[str | None, str], str] = {}  # (turn, call id) -> tool name
    turns = sorted({n.turn_id for n in nodes if n.turn_id is not None})
    for chunk in chunks(turns):
        for seq, kind, at, turn, data_json in await store.select(
                f"SELECT seq, kind, at, turn_id, data FROM audit_log WHERE turn_id IN "
                f"({d.phs(len(chunk))}) AND kind IN ({_RECORDS[1:-1]}, 'tool_call.started') "
                "ORDER BY seq", chunk):
            data = entry_data(data_json, int(seq))
            if kind == "tool_call.started":
                tools.setdefault((turn, str(data.get("tool_call_id"))), str(data["tool_name"]))
            else:
                entries[str(data.get("node_id"))] = (int(seq), str(at))
    direct = sorted({n.tool_call_id for n in nodes
                     if n.turn_id is None and n.tool_call_id is not None})
    for chunk in chunks(direct):
        for seq, _, kind, _, _, _, data_json, *_ in await store.select(
                direct_calls(d, len(chunk)), chunk):
            data = entry_data(data_json, int(seq))
            if kind == "tool_call.started":
                tools.setdefault((None, str(data.get("tool_call_id"))), str(data["tool_name"]))
    node_id = MEMORY_ID if d.name == "postgres" else d.text("node_id")  # as indexed
    for node in nodes:
        if node.turn_id is None:  # a turn's were read above
            found = await store.select(
                f"SELECT seq, at FROM audit_log WHERE kind IN {_RECORDS} AND {KIND_INDEXED} "
                f"AND {node_id} = {d.ph} ORDER BY seq DESC LIMIT 1", (node.id,))
            if found:
                entries[node.id] = (int(found[0][0]), str(found[0][1]))
    out = []
    for node in nodes:
        seq, at = entries.get(node.id, (None, None))
        tool = (tools.get((node.turn_id, node.tool_call_id))
                if node.tool_call_id is not None else None)
        out.append(Revision(node, seq, at, tool))
    return out
