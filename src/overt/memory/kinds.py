"""Node kinds and link kinds of the memory graph, and which kinds a link may join.

The 18 built-in node kinds are the 17 domain kinds an engineering agent keeps
(decisions, gotchas, tickets, components, ...) plus ``Note`` for free text.
Link rules say, per link kind, which (from kind, to kind) pairs it may join;
``*`` on either side stands for any node kind, including ones added later.

A deployment adds kinds by config (``[memory]`` in ``overt.toml``)::

    [memory]
    kinds = ["Incident"]
    links = { mitigates = [["Decision", "Incident"]], relates_to = [["Incident", "*"]] }

Added pairs extend a link kind's rules; a new link kind starts with the pairs given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from overt.errors import ConfigError

ANY = "*"

DOMAIN_KINDS: tuple[str, ...] = (
    "Decision", "Gotcha", "Pattern", "Convention", "Concept", "Ticket", "FailedAttempt",
    "AcceptanceTest", "GamingPattern", "Project", "Component", "Milestone", "CrossCut",
    "ExternalDependency", "Resource", "Tool", "Schema",
)
BUILTIN_NODE_KINDS: tuple[str, ...] = (*DOMAIN_KINDS, "Note")

_WORK = ("Ticket", "Milestone", "Project")
_STRUCTURE = ("Project", "Component", "Milestone")
_GUIDANCE = ("Decision", "Convention", "Pattern", "Gotcha", "CrossCut", "Concept")

BUILTIN_LINKS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "relates_to": ((ANY, ANY),),
    "contradicts": ((ANY, ANY),),
    "part_of": tuple((ANY, whole) for whole in _STRUCTURE),
    "depends_on": tuple((a, b) for a in ("Project", "Component", "Ticket", "Tool", "Schema")
                        for b in ("Component", "ExternalDependency", "Resource", "Tool",
                                  "Schema", "Ticket", "Decision")),
    "blocks": tuple((a, b) for a in ("Ticket", "Gotcha", "ExternalDependency", "FailedAttempt")
                    for b in _WORK),
    "implements": tuple((a, b) for a in ("Component", "Ticket", "Tool", "Schema")
                        for b in (*_GUIDANCE, "Ticket", "AcceptanceTest")),
    "verifies": tuple(("AcceptanceTest", b) for b in
                      ("Ticket", "Component", "Decision", "Milestone", "Project", "Schema")),
    "applies_to": tuple((a, ANY) for a in _GUIDANCE),
    "caused_by": tuple((a, ANY) for a in ("Gotcha", "FailedAttempt", "GamingPattern", "Ticket",
                                          "Decision")),
}
"""The link kinds overt knows and the pairs each may join (``*``: any kind)."""

_NODE_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,47}$")
_LINK_KIND = re.compile(r"^[a-z][a-z0-9_]{0,47}$")


@dataclass(frozen=True, slots=True)
class MemoryKinds:
    """The node kinds a memory accepts and the link rules it enforces.

    Build with :meth:`builtin`, then :meth:`extended` for what config or a
    plugin adds. Immutable: the tools hold one for the life of a runtime.
    """

    node_kinds: tuple[str, ...] = BUILTIN_NODE_KINDS
    links: Mapping[str, tuple[tuple[str, str], ...]] = field(
        default_factory=lambda: dict(BUILTIN_LINKS))

    @classmethod
    def builtin(cls) -> MemoryKinds:
        """The 18 built-in node kinds and the built-in link rules."""
        return cls()

    def extended(self, kinds: Iterable[str] = (),
                 links: Mapping[str, Sequence[Sequence[str]]] | None = None) -> MemoryKinds:
        """These kinds plus ``kinds``, and ``links`` pairs added to the rules.

        Raises:
            ConfigError: a kind or link kind is malformed, or a pair names an
                unknown node kind or is not a pair.
        """
        node_kinds = list(self.node_kinds)
        for kind in kinds:
            if not isinstance(kind, str) or not _NODE_KIND.match(kind):
                raise ConfigError(f"memory.kinds: {kind!r} is not a node kind "
                                  "(CamelCase letters and digits, at most 48)")
            if kind not in node_kinds:
                node_kinds.append(kind)
        rules = {k: list(v) for k, v in self.links.items()}
        for link_kind, pairs in (links or {}).items():
            if not isinstance(link_kind, str) or not _LINK_KIND.match(link_kind):
                raise ConfigError(f"memory.links: {link_kind!r} is not a link kind "
                                  "(snake_case, at most 48)")
            for pair in pairs:
                if isinstance(pair, str) or len(pair) != 2:
                    raise ConfigError(f"memory.links.{link_kind}: {pair!r} is not a "
                                      "[from kind, to kind] pair")
                for end in pair:
                    if end != ANY and end not in node_kinds:
                        raise ConfigError(f"memory.links.{link_kind}: unknown node kind "
                                          f"{end!r} (known: {', '.join(node_kinds)}, or *)")
                entry = (pair[0], pair[1])
                current = rules.setdefault(link_kind, [])
                if entry not in current:
                    current.append(entry)
        return MemoryKinds(tuple(node_kinds), {k: tuple(v) for k, v in rules.items()})

    @property
    def link_kinds(self) -> tuple[str, ...]:
        return tuple(self.links)

    def allows(self, link_kind: str, from_kind: str, to_kind: str) -> bool:
        """Whether a ``link_kind`` link may go from a ``from_kind`` to a ``to_kind`` node."""
        return any(a in (ANY, from_kind) and b in (ANY, to_kind)
                   for a, b in self.links.get(link_kind, ()))

    def targets(self, link_kind: str, from_kind: str) -> list[str]:
        """The node kinds a ``link_kind`` link from a ``from_kind`` node may reach
        (``*`` for any), for error messages the model can act on."""
        return sorted({b for a, b in self.links.get(link_kind, ()) if a in (ANY, from_kind)})
