"""The memory graph's values: node revisions, links between node chains, search hits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from overt.events import MemoryOrigin


@dataclass(frozen=True, slots=True)
class Node:
    """One revision of a memory node, and what wrote it: ``origin`` (``tool``,
    ``api``, ``cli``), the tool call (``tool_call_id``) and the turn and session it
    ran in."""

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
    origin: MemoryOrigin = "api"

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
    origin: MemoryOrigin = "api"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "from_id": self.from_id, "to_id": self.to_id,
                "actor": self.actor, "created_at": self.created_at}


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the current revision and its relevance (higher is better;
    0 when the search had no query words)."""

    node: Node
    score: float
