"""A tool run outside a turn: a batch or scheduled job, or a held call released.

The same gate as the loop, on the ``direct`` path (or ``review`` for a call an
operator released): capability and policy first; ``ask`` or ``quarantine``
holds the call as an approval request that deciding releases. Recorded like a
loop call (decision, intent before the effect, completion); only registered
tool functions run here, not tools a plugin provides results for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from overt.engine.dispatch import execute, refuse
from overt.engine.limits import bounded_call
from overt.engine.record import CallSite, Recorder, canonical_or_repr
from overt.events import GatePath, PolicyDecided
from overt.ids import new_ulid
from overt.policy.actors import Actor
from overt.tools.base import ToolContext
from overt.types import ToolCall

if TYPE_CHECKING:  # the loop imports nothing from here; only the type is needed
    from overt.engine.loop import Engine


@dataclass(frozen=True, slots=True)
class DirectResult:
    """How a direct call ended: ``held`` (with ``request_id``) or a tool status."""

    tool_call_id: str
    status: str
    content: str
    is_error: bool
    decision: PolicyDecided | None
    request_id: str | None = None


async def run_direct(engine: Engine, name: str, arguments: Mapping[str, Any], *, actor: Actor,
                     source: str = "cli", path: GatePath = "direct",
                     approved_request: str | None = None, turn_id: str | None = None,
                     session_id: str | None = None, tool_call_id: str | None = None,
                     caller_session_id: str | None = None) -> DirectResult:
    """Run tool ``name`` once with ``arguments`` as ``actor``, through the gate.

    Raises:
        LedgerError: a record could not be written (the tool did not run if
            its intent was not recorded).
    """
    rec = Recorder(engine.ledger, engine.observers, engine.hooks.on_event, engine.parts)
    call = bounded_call(ToolCall(tool_call_id or f"direct_{new_ulid()}", name, dict(arguments)))
    call_id = call.id
    site = CallSite(turn_id, session_id, source, caller_session_id or f"direct:{actor}")
    args_digest = rec.content(canonical_or_repr(call.arguments))
    tool = engine.tools.get(name)
    verdict = None
    if call.malformed is not None:
        outcome = refuse("malformed_tool_call", call.malformed, "execution_error")
    elif tool is None:
        outcome = refuse("not_allowed", f"unknown tool {name!r}; available tools: "
                         f"{', '.join(sorted(t.name for t in engine.tools)) or 'none'}",
                         "unknown_tool")
    else:
        verdict = engine.gate.check(
            tool_name=name, tool=tool, arguments=call.arguments, args_digest=args_digest,
            tool_call_id=call_id, actor=actor, source=source, route=engine.settings.route,
            turn_id=turn_id, session_id=session_id, path=path,
            approved_request=approved_request)
        rec.add(verdict.event)
        rec.part(engine.gate.policy.text)
        if verdict.effect in ("ask", "quarantine"):
            request = verdict.hold("quarantine" if verdict.effect == "quarantine"
                                   else "approval", ttl_s=engine.gate.approval_ttl_s)
            rec.add(request)
            await rec.flush()
            return DirectResult(call_id, "held", f"{verdict.reason_code}: {verdict.message}",
                                True, verdict.event, request.request_id)
        if verdict.effect != "allow":
            outcome = refuse(verdict.reason_code, verdict.message)
        else:
            rec.add(site.intent(call, args_digest))
            await rec.flush()  # the decision and the intent are on the record before the effect
            context = ToolContext(engine.ledger, turn_id or "", session_id or "", source,
                                  site.caller_session_id, call.id, engine.runtime_started_at,
                                  actor,
                                  engine.gate.capabilities)
            outcome = await execute(tool, call, context, engine.settings.tool_timeout_s)
    rec.add(site.completion(call, outcome, args_digest, rec.content(outcome.content),
                            known=tool is not None))
    await rec.flush()
    return DirectResult(call_id, outcome.status, outcome.content, outcome.is_error,
                        verdict.event if verdict is not None else None)

