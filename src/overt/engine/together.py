"""Read-only tool calls of one model response, run together.

A model that asks for several calls in one response asks for them at once. When
consecutive calls are to registered read-only tools, overt decides each in order
(the limits, then the gate: every decision recorded), commits the decisions and
the intents of those allowed in one batch, then runs them concurrently. Their
results are recorded, and read back to the model, in the order the model asked.

What stays as for a call run alone:
- every executed call's ``tool_call.started`` is committed before its effect;
- a call the gate refuses is recorded refused and not run; one it holds for a
  human ends the group there: the calls allowed before it run, then the turn
  pauses, and the calls after it wait for the decision;
- each call has its own timeout, and a failure is the model's to read.

What differs: the calls of a group all run, so a run of failures among them is
counted when they have ended (the calls after the group are then refused, not
those inside it). A call to a tool that changes something, and every call while a
plugin hooks tool calls, runs alone, in order, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from overt.engine.decide import CallingTurn, decide
from overt.engine.dispatch import ToolOutcome
from overt.engine.values import Allowed, Held
from overt.types import ToolCall


def size(turn: CallingTurn, calls: Sequence[ToolCall]) -> int:
    """How many of ``calls``, from the first, run together (0: the first runs alone)."""
    hooks = turn.engine.hooks
    if (hooks.pre_tool_call or hooks.post_tool_call or hooks.pre_tool_call_can_provide_result
            or hooks.transform_tool_result):
        return 0  # a plugin hooks each call: it sees them one at a time
    settings = turn.engine.settings
    room = min(settings.max_tool_calls - turn.response_calls,
               settings.max_tool_calls_per_turn - turn.tool_calls)  # calls past it are refused
    count = 0
    for call in calls[:room]:
        tool = turn.engine.tools.get(call.name)
        if (call.malformed is not None or tool is None or not tool.read_only
                or call.name not in turn.offered):
            break
        count += 1
    return count if count > 1 else 0


async def run(turn: CallingTurn, calls: Sequence[ToolCall]) -> list[ToolOutcome | Held]:
    """Decide ``calls`` in order, commit, run those allowed together; the outcome of
    each call decided, in order (a :class:`Held` ends the list: the calls after it
    are not decided)."""
    decided: list[ToolOutcome | Held | Allowed] = []
    allowed = 0
    for call in calls:
        answer = decide(turn, call, turn.offered, allowed_before=allowed)
        decided.append(answer)
        if isinstance(answer, Held):
            break
        if isinstance(answer, Allowed):
            allowed += 1
            turn.recorder.add(turn.site.intent(call, answer.args_digest))
    if not allowed:
        return [d for d in decided if not isinstance(d, Allowed)]
    await turn.recorder.flush()  # every decision and intent on the record before the effects
    async with asyncio.TaskGroup() as group:
        running = [group.create_task(turn.dispatch(d.tool, call))
                   if isinstance(d, Allowed) and d.tool is not None else None
                   for call, d in zip(calls, decided, strict=False)]
    outcomes: list[ToolOutcome | Held] = []
    for call, answer, task in zip(calls, decided, running, strict=False):
        if isinstance(answer, Allowed):
            assert task is not None  # (an allowed call here is to a registered tool)
            outcomes.append(turn.complete(call, task.result(), answer.args_digest, None, None))
        else:
            outcomes.append(answer)
    return outcomes
