"""Capability checks the memory tools make themselves, each on the record.

The engine's gate checks the capability a tool declares (``memory.read`` or
``memory.write``) before the tool runs. Two checks need the tool's own
knowledge: whether a node belongs to another actor (``memory.read_cross_actor``,
recorded whether granted or not), and, as a second line behind the gate,
``memory.write`` (recorded when denied: a granted write is already on the
record through the gate's decision and the write's own event).
"""

from __future__ import annotations

from overt.events import CapabilityChecked
from overt.memory.envelope import Envelope, error
from overt.tools.base import ToolContext

WRITE = "memory.write"
READ_CROSS_ACTOR = "memory.read_cross_actor"


def me(ctx: ToolContext) -> str:
    """The actor a call acts as, as memory rows name it."""
    return str(ctx.actor)


async def _record(ctx: ToolContext, capability: str, granted: bool, reason_code: str,
                  subject: str) -> None:
    await ctx.ledger.record([CapabilityChecked(
        turn_id=ctx.turn_id or None, session_id=ctx.session_id or None, actor=me(ctx),
        capability=capability, granted=granted, reason_code=reason_code, subject=subject,
        tool_call_id=ctx.tool_call_id or None)])


async def may_write(ctx: ToolContext, subject: str) -> Envelope | None:
    """None when the actor holds ``memory.write``; else the refusal (recorded)."""
    check = ctx.capabilities.check(ctx.actor, WRITE)
    if check.granted:
        return None
    await _record(ctx, WRITE, False, check.reason_code, subject)
    return error("capability_missing", check.message, capability=WRITE)


async def may_read_others(ctx: ToolContext, subject: str) -> Envelope | None:
    """Check (and record) ``memory.read_cross_actor``: None when granted, else the refusal."""
    check = ctx.capabilities.check(ctx.actor, READ_CROSS_ACTOR)
    await _record(ctx, READ_CROSS_ACTOR, check.granted, check.reason_code, subject)
    if check.granted:
        return None
    return error("capability_missing",
                 f"{check.message}: this touches memory written by another actor",
                 capability=READ_CROSS_ACTOR)


async def may_touch(ctx: ToolContext, owners: set[str], subject: str) -> Envelope | None:
    """None when every owner is the caller, or the caller may read others' memory."""
    if owners <= {me(ctx)}:
        return None
    return await may_read_others(ctx, subject)
