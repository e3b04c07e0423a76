"""Who acts: the operator, the agent on a route, an MCP client of a given kind.

An actor is written ``KIND:NAME`` in config and on the record
(``operator:alice``, ``agent:default``, ``mcp_client:claude-code``,
``system:expiry``). Capabilities are granted to actor patterns
(:mod:`overt.policy.capabilities`).
"""

from __future__ import annotations

from dataclasses import dataclass

from overt.errors import UsageError
from overt.ids import id_problem

ACTOR_KINDS = ("operator", "agent", "mcp_client", "system")


@dataclass(frozen=True, slots=True)
class Actor:
    """One actor. ``str(actor)`` is how config and the ledger name it."""

    kind: str
    name: str

    def __post_init__(self) -> None:
        if self.kind not in ACTOR_KINDS:
            raise UsageError(f"unknown actor kind {self.kind!r} (known: {', '.join(ACTOR_KINDS)})")
        if not self.name or any(c.isspace() for c in self.name):
            raise UsageError(f"actor name {self.name!r} must be non-empty, without spaces")
        if (problem := id_problem(str(self), typed=False)) is not None:
            raise UsageError(f"actor {ascii(str(self))[:80]}: {problem}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> Actor:
        """``"agent:default"`` as an actor; a bare kind names ``KIND:default``.

        Raises:
            UsageError: the kind is unknown or the name is empty.
        """
        kind, _, name = text.partition(":")
        return cls(kind, name or "default")

    @classmethod
    def agent(cls, name: str = "default") -> Actor:
        """The agent named ``name``: one identity whichever route it answers on (the
        route is recorded beside it), so what it wrote on one route it finds on another."""
        return cls("agent", name)

    @classmethod
    def operator(cls, name: str = "default") -> Actor:
        return cls("operator", name)
