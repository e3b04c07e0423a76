"""overt's built-in read-only tools: real answers from the ledger.

- ``get_operational_state``: since when the runtime has run, turns today, the
  last error, pending approvals.
- ``get_usage``: tokens and cost per route and model for a period (the
  operator's "what's my burn?").

Each answers the actor who asked (:mod:`overt.tools.asker`) about what that
actor may read through the API: the sessions it started, or every session when it
holds ``sessions.read_any``. An actor without it is told its own figures, its own
last error and its own approval requests, and no other session's id.
"""

from __future__ import annotations

from typing import Any, Literal

from overt.clock import period_bounds, period_start
from overt.events import Event, HookError, InferenceRecorded, ToolCallCompleted, TurnCompleted
from overt.ledger.base import UsageRow
from overt.policy.approvals import ApprovalBook
from overt.tools.asker import Asker, asker
from overt.tools.base import Tool, ToolContext, tool

Period = Literal["today", "yesterday", "24h", "7d", "30d", "all"]
Grouping = Literal["route_and_model", "route", "model", "day", "session"]
GROUPS: dict[str, tuple[str, ...]] = {
    "route_and_model": ("route", "model"), "route": ("route",), "model": ("model",),
    "day": ("day",), "session": ("session",),
}


def _failure(event: Event) -> dict[str, Any]:
    """What failed, as :meth:`Ledger.last_error` finds it: its type and where."""
    match event:
        case TurnCompleted():
            return {"type": event.error_type or event.status}
        case ToolCallCompleted():
            return {"type": event.exc_type or event.tool_status, "tool_name": event.tool_name}
        case InferenceRecorded():
            return {"type": event.error_type}
        case HookError():
            return {"type": event.error_type, "plugin": event.plugin, "hook": event.hook}
    return {"type": None}


@tool(read_only=True, capability="runtime.read")
async def get_operational_state(ctx: ToolContext) -> dict[str, Any]:
    """Report how the agent runtime is doing right now: since when it has run, how many
    turns it answered today, its last error, and how many approvals are pending.

    Use when the operator asks what the agent or daemon is doing, whether it is healthy,
    or what went wrong recently.
    """
    today = period_start("today")
    who = await asker(ctx)
    first = await ctx.ledger.entries(limit=1)
    last_error = await who.last_error()
    error: dict[str, Any] | None = None
    if last_error is not None:
        error = {"at": last_error.at, "kind": last_error.kind,
                 "turn_id": last_error.turn_id, **_failure(last_error.event())}
    book = ApprovalBook(ctx.ledger, ctx.capabilities)
    approved = await who.approvals(await book.list(["approved"]))
    interrupted = [{"request_id": r.request_id, "tool_name": r.tool_name,
                    "started_seq": r.call_started_seq} for r in approved if r.interrupted]
    unstarted = [{"request_id": r.request_id, "tool_name": r.tool_name,
                  "taken_up_seq": r.taken_up_seq} for r in approved if r.unstarted]
    if who.sessions is None:  # every request: counted without reading them all
        requested = await ctx.ledger.count("approval.requested")
        pending = max(0, requested - await ctx.ledger.count("approval.decided"))
    else:
        pending = len(await who.approvals(await book.list(["pending"])))
    return {
        "runtime_started_at": ctx.runtime_started_at,
        "ledger_started_at": first[0].at if first else None,
        "turns_today": await who.count("turn.started", since=today),
        "tool_calls_today": await who.count("tool_call.completed", since=today),
        "last_error": error,
        "pending_approvals": pending,
        "interrupted_approved_calls": interrupted,
        "unstarted_approved_calls": unstarted,
    }


@tool(read_only=True, capability="usage.read")
async def get_usage(ctx: ToolContext, period: Period = "today",
                    by: Grouping = "route_and_model") -> dict[str, Any]:
    """Report tokens used and money spent over a period, per route and model (or per day).

    Use when the operator asks about cost, burn, spend, tokens or usage.

    Args:
        period: which period to total: today (since midnight UTC), yesterday (the day
            before, midnight to midnight UTC), 24h, 7d, 30d or all.
        by: how to break the total down: route_and_model, route, model, day or session.
    """
    since, until = period_bounds(period)
    groups = GROUPS[by]
    rows = await _usage(await asker(ctx, since=since), since, until, groups)
    breakdown = [
        {
            **{g: getattr(r, g) for g in groups},
            "inferences": r.inferences,
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "cost_usd": r.cost_usd,
        }
        for r in rows
    ]
    return {
        "period": period,
        "since": since,
        **({"until": until} if until else {}),
        "total_tokens": sum(r.input_tokens + r.output_tokens for r in rows),
        "total_input_tokens": sum(r.input_tokens for r in rows),
        "total_output_tokens": sum(r.output_tokens for r in rows),
        "total_cost_usd": round(sum(r.cost_usd for r in rows), 6),
        "inferences": sum(r.inferences for r in rows),
        f"by_{by}": breakdown,
    }


async def _usage(who: Asker, since: str | None, until: str | None,
                 groups: tuple[str, ...]) -> list[UsageRow]:
    """:meth:`Ledger.usage` of the sessions ``who`` may read: every session's rows as
    they are, else the rows per session of its own, added up per group."""
    ledger = who.access.ledger
    if who.sessions is None:
        return await ledger.usage(since=since, until=until, by=groups)
    totals: dict[tuple[str, ...], list[Any]] = {}
    for row in await ledger.usage(since=since, until=until, by=("session", *groups)):
        if not who.sees(row.session):
            continue
        key = tuple(getattr(row, g) for g in ("route", "model", "day", "session")
                    if g in groups)
        total = totals.setdefault(key, [row, 0, 0, 0, 0.0])
        total[1:] = [total[1] + row.inferences, total[2] + row.input_tokens,
                     total[3] + row.output_tokens, total[4] + row.cost_usd]
    out = [UsageRow(r.route if "route" in groups else "*", r.model if "model" in groups else "*",
                    n, i, o, round(c, 10), r.day if "day" in groups else "*",
                    r.session if "session" in groups else "*")
           for r, n, i, o, c in totals.values()]
    out.sort(key=lambda r: (r.day, r.cost_usd, r.input_tokens), reverse=True)
    return out


def builtin_tools() -> list[Tool]:
    """The built-in tools, fresh list each call."""
    return [get_operational_state, get_usage]
