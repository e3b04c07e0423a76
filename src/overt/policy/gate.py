"""The one gate: every tool execution, on every path, asks it first.

Order: the actor's capability for the tool, then the policy rules. A missing
capability denies before any rule is read. A call resumed or released after
a human approved it is re-checked on the exact call: the approval answers
``ask`` (and ``quarantine`` for a released call), never ``deny`` or a missing
capability.

Paths (``GatePath``): ``loop`` (the engine), ``resume`` (a paused turn taken
up after approval), ``direct`` (a batch or scheduled run through
:meth:`overt.runtime.Runtime.call_tool`), ``review`` (an operator releasing a
quarantined call). A plugin that provides a tool's result is asked only
after the gate allowed the call, so it is gated too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from overt.clock import iso_after
from overt.errors import ConfigError
from overt.events import ApprovalMode, ApprovalRequested, GatePath, PolicyDecided
from overt.ids import new_ulid
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities, CapabilityCheck, tool_capability
from overt.policy.engine import Policy
from overt.policy.rules import Effect, Rule
from overt.tools.base import Tool

DEFAULT_APPROVAL_TTL_S = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """``[policy]``: rules before the defaults (``defaults = false`` drops them: then a
    call no rule matches is denied), and how long an approval request waits."""

    rules: tuple[Rule, ...] = ()
    defaults: bool = True
    approval_ttl_s: float = DEFAULT_APPROVAL_TTL_S

    def __post_init__(self) -> None:
        if self.approval_ttl_s <= 0:
            raise ConfigError(f"policy approval_ttl_s must be positive, got {self.approval_ttl_s}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the gate decided for one call; ``event`` is its record."""

    effect: Effect
    reason_code: str
    message: str
    capability: CapabilityCheck
    event: PolicyDecided

    @property
    def decision_id(self) -> str:
        return self.event.decision_id

    def hold(self, mode: ApprovalMode, *, ttl_s: float) -> ApprovalRequested:
        """An approval request bound to this exact call: tool, arguments digest,
        turn and actor (the decision's own)."""
        event = self.event
        request_id = new_ulid()
        return ApprovalRequested(
            turn_id=event.turn_id, session_id=event.session_id, claim=request_id,
            request_id=request_id, mode=mode, decision_id=event.decision_id,
            tool_call_id=event.tool_call_id, tool_name=event.tool_name,
            args_sha256=event.args_sha256, actor=event.actor, source=event.source,
            reason_code=self.reason_code, expires_at=iso_after(ttl_s))


class Gate:
    """Capabilities, then policy. Immutable; shared by every turn of a runtime."""

    def __init__(self, policy: Policy | None = None, capabilities: Capabilities | None = None,
                 *, approval_ttl_s: float = DEFAULT_APPROVAL_TTL_S) -> None:
        self.policy = policy or Policy()
        self.capabilities = capabilities or Capabilities()
        self.approval_ttl_s = approval_ttl_s

    def check(self, *, tool_name: str, tool: Tool | None, arguments: Mapping[str, Any],
              args_digest: str, tool_call_id: str, actor: Actor, source: str, route: str,
              turn_id: str | None, session_id: str | None, path: GatePath = "loop",
              approved_request: str | None = None, read_only: bool = False) -> Verdict:
        """Decide one call. Never raises on any arguments.

        ``tool`` is None for a tool a plugin offers without a function: it is
        mutating unless its describer said ``read_only``, and needs ``tool.NAME``.
        """
        mutating = not (tool.read_only if tool is not None else read_only)
        capability = tool_capability(tool_name, tool.capability if tool is not None else None)
        held = self.capabilities.check(actor, capability)
        evaluated: tuple[str, ...]
        if not held.granted:
            effect: Effect = "deny"
            reason_code, message, rule, evaluated = (
                "capability_missing", held.message, "capability", ("capability",))
        else:
            decision = self.policy.decide(tool_name, arguments, source=source, route=route,
                                          actor=str(actor), mutating=mutating)
            effect, reason_code, message = decision.effect, decision.reason_code, decision.message
            rule, evaluated = decision.rule, decision.rules_evaluated
            if approved_request is not None and (
                    effect == "ask" or (effect == "quarantine" and path == "review")):
                effect, reason_code = "allow", "approved"
                message = f"approved by a human (request {approved_request}); rule {rule}"
        event = PolicyDecided(
            turn_id=turn_id, session_id=session_id, decision_id=new_ulid(),
            tool_call_id=tool_call_id, tool_name=tool_name, effect=effect,
            reason_code=reason_code, message=message, rule=rule,
            rules_evaluated=list(evaluated), args_sha256=args_digest, actor=str(actor),
            source=source, route=route, mutating=mutating, capability=capability,
            capability_granted=held.granted, path=path, approval_request_id=approved_request,
            policy_digest=self.policy.digest)
        return Verdict(effect, reason_code, message, held, event)
