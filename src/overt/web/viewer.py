"""Who is looking: an actor and what its capabilities let the cockpit show it.

The cockpit applies the API's rules (:mod:`overt.channels.http`,
:mod:`overt.sessions.access`), read through one object so every page asks the
same questions:

- a session, its turns and its approval requests are shown to the actor that
  started the session, or to an actor holding ``sessions.read_any``;
- bodies (message text, reasoning step text, tool arguments and results, a
  session's title) are shown only to an actor holding ``trail.read``, the
  capability under which the API returns a trail's content; without it a page
  shows the audit tier only (ids, kinds, statuses, durations, tokens, digests);
- approvals need ``approvals.read`` to be listed and ``approvals.decide`` to be
  decided; usage needs ``usage.read``; memory needs ``memory.read`` (another
  actor's nodes also ``memory.read_cross_actor``); the ledger page and its
  verify need ``runtime.read``.
"""

from __future__ import annotations

from dataclasses import dataclass

from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.sessions.access import READ_ANY

CONTENT = "trail.read"
APPROVALS_READ = "approvals.read"
APPROVALS_DECIDE = "approvals.decide"
USAGE = "usage.read"
MEMORY = "memory.read"
MEMORY_OTHERS = "memory.read_cross_actor"
LEDGER = "runtime.read"


@dataclass(frozen=True, slots=True)
class Viewer:
    """An actor logged in to the cockpit, under the runtime's grants."""

    actor: Actor
    capabilities: Capabilities

    def may(self, capability: str) -> bool:
        """Whether the actor holds ``capability``."""
        return self.capabilities.check(self.actor, capability).granted

    @property
    def name(self) -> str:
        return str(self.actor)

    @property
    def reads_any(self) -> bool:
        return self.may(READ_ANY)

    @property
    def reads_content(self) -> bool:
        return self.may(CONTENT)

    def sees_session(self, owner: str | None) -> bool:
        """Whether a session ``owner`` started is shown (``None``: unknown, never)."""
        return owner is not None and (owner == self.name or self.reads_any)

    def sees_memory_of(self, actor: str) -> bool:
        return self.may(MEMORY) and (actor == self.name or self.may(MEMORY_OTHERS))

    @property
    def key(self) -> tuple[str, bool, bool]:
        """What a rendering for this viewer depends on (viewers alike share one)."""
        return self.name, self.reads_any, self.reads_content
