"""Capabilities: what each actor may do, granted in config, checked on every path.

A capability is a dotted name (``usage.read``, ``memory.write``,
``approvals.decide``). A tool declares the one it needs (``@tool(capability=...)``);
a tool that declares none needs ``tool.NAME``. Grants map actor patterns to
capability patterns, both globs::

    [capabilities]
    "operator" = ["*"]
    "agent:*" = ["runtime.read", "usage.read", "memory.read", "memory.write", "tool.*"]
    "agent:support" = ["usage.read"]          # replaces the grant above for the agent named support
    "mcp_client:claude-code" = ["agent.ask", "memory.read"]

An actor holds the capabilities of its most specific matching pattern: an exact
``KIND:NAME`` over ``KIND:*`` (or the bare ``KIND``) over ``*``. A config that
names an actor pattern replaces the default grant for it. Nothing is granted by
default that the defaults below do not list: an unknown actor holds nothing.

Every check returns a :class:`CapabilityCheck` with a reason; the caller records it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from overt.errors import ConfigError
from overt.policy.actors import ACTOR_KINDS, Actor

DEFAULT_GRANTS: Mapping[str, tuple[str, ...]] = {
    "operator": ("*",),
    "agent": ("runtime.read", "usage.read", "memory.read", "memory.write", "tool.*"),
    "mcp_client": ("agent.ask", "trail.read", "approvals.read", "memory.read"),
    "system": ("approvals.expire",),
}
"""The grants of a config that names none. The agent may use read tools, its
memory and tools that declare no capability (policy still gates the mutating
ones); it may not read other actors' memory or decide approvals."""

_CAPABILITY = re.compile(r"^[a-z0-9_*?\-]+(\.[a-z0-9_*?\-]+)*$")


def tool_capability(name: str, declared: str | None) -> str:
    """The capability a tool needs: the one it declares, else ``tool.NAME``."""
    return declared if declared else f"tool.{name}"


@dataclass(frozen=True, slots=True)
class CapabilityCheck:
    """The outcome of one check, with why."""

    granted: bool
    actor: str
    capability: str
    reason_code: str
    """``granted`` or ``capability_missing``."""
    message: str
    grant: str | None = None
    """The actor pattern whose grant decided it."""


class Capabilities:
    """Grants per actor pattern; :meth:`check` answers with a reason."""

    def __init__(self, grants: Mapping[str, Sequence[str]] | None = None) -> None:
        """``grants`` over :data:`DEFAULT_GRANTS` (a pattern given replaces the default's).

        Raises:
            ConfigError: an actor pattern or capability is malformed.
        """
        merged: dict[str, tuple[str, ...]] = dict(DEFAULT_GRANTS)
        for pattern, capabilities in (grants or {}).items():
            _check_pattern(pattern)
            if isinstance(capabilities, str):
                raise ConfigError(f"capabilities.{pattern} must be a list of capabilities")
            for capability in capabilities:
                if not isinstance(capability, str) or not _CAPABILITY.match(capability):
                    raise ConfigError(f"capabilities.{pattern}: {capability!r} is not a "
                                      "capability (dotted lower-case names, globs allowed)")
            merged[_normal(pattern)] = tuple(capabilities)
        self.grants: Mapping[str, tuple[str, ...]] = merged
        self._cache: dict[tuple[str, str], CapabilityCheck] = {}

    def grant_of(self, actor: Actor) -> tuple[str | None, tuple[str, ...]]:
        """(the pattern that applies to ``actor``, its capabilities); most specific wins."""
        exact = str(actor)
        if exact in self.grants:
            return exact, self.grants[exact]
        best: tuple[int, str] | None = None
        for pattern in self.grants:
            if pattern == actor.kind:  # (KIND:* is stored as KIND)
                rank = 1
            elif ":" in pattern and fnmatch.fnmatchcase(exact, pattern):
                rank = 2
            elif pattern == "*":
                rank = 0
            else:
                continue
            if best is None or rank > best[0]:
                best = (rank, pattern)
        if best is None:
            return None, ()
        return best[1], self.grants[best[1]]

    def check(self, actor: Actor, capability: str) -> CapabilityCheck:
        """Whether ``actor`` holds ``capability``, and why."""
        key = (str(actor), capability)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        pattern, held = self.grant_of(actor)
        hit = next((c for c in held if fnmatch.fnmatchcase(capability, c)), None)
        if hit is not None:
            result = CapabilityCheck(True, key[0], capability, "granted",
                                     f"{key[0]} holds {capability} (grant {pattern!r}: {hit})",
                                     pattern)
        else:
            where = f"grant {pattern!r}" if pattern else "no grant matches this actor"
            result = CapabilityCheck(False, key[0], capability, "capability_missing",
                                     f"{key[0]} does not hold {capability} ({where})", pattern)
        self._cache[key] = result
        return result


def _normal(pattern: str) -> str:
    """``KIND:*`` as ``KIND``: the same grant, one key."""
    return pattern[:-2] if pattern.endswith(":*") and pattern[:-2] in ACTOR_KINDS else pattern


def _check_pattern(pattern: str) -> None:
    kind = pattern.partition(":")[0]
    if pattern != "*" and kind not in ACTOR_KINDS:
        raise ConfigError(f"capabilities: {pattern!r} does not name an actor kind "
                          f"({', '.join(ACTOR_KINDS)}), as KIND or KIND:NAME")
