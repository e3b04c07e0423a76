"""One tool call, from the model's request to the result it reads back.

Decides the call's fate in a fixed order (cap, malformed, unknown tool,
dispatch), runs the tool with its timeout, and turns every failure into an
``is_error`` result the model can read. Nothing here raises for a bad call:
the turn goes on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from overt.clock import ms_since
from overt.errors import ToolArgumentError
from overt.events import ToolStatus
from overt.tools.base import Tool, ToolContext
from overt.tools.registry import ToolRegistry
from overt.types import ToolCall


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """How a tool call ended, and what the model reads back."""

    status: ToolStatus
    content: str
    is_error: bool
    duration_ms: float
    exc_type: str | None = None
    reason_code: str | None = None
    executed: bool = False

    @property
    def code(self) -> str:
        """What the call's failure was, as the model reads it first: why it was not
        run (its reason code), else ``tool_timeout`` or ``tool_execution_error``
        (``ok`` for a call that did not fail)."""
        if self.reason_code is not None:
            return self.reason_code
        if not self.is_error:
            return "ok"
        return "tool_timeout" if self.status == "timeout" else "tool_execution_error"


def exc_type_name(exc: BaseException) -> str:
    """The exception type a model and an auditor see.

    An argument that fails validation is reported as ``TypeError``, the name
    Python gives a call with a wrong or invented keyword.
    """
    if isinstance(exc, ToolArgumentError):
        return "TypeError"
    return type(exc).__name__


_RESULT_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(", ", ": "))


def render_result(value: Any) -> str:
    """A tool's return value as the text a model reads."""
    if isinstance(value, str):
        return value
    try:
        return _RESULT_ENCODER.encode(value)
    except (TypeError, ValueError):
        return repr(value)


def refuse(reason_code: str, message: str, status: ToolStatus = "not_allowed") -> ToolOutcome:
    """An outcome for a call that is not executed."""
    return ToolOutcome(status, f"{reason_code}: {message}", True, 0.0, reason_code=reason_code)


def precheck(call: ToolCall, registry: ToolRegistry, offered: frozenset[str],
             calls_so_far: int, cap: int, *, can_provide: bool = False,
             turn_calls: int = 0, turn_cap: int | None = None) -> ToolOutcome | Tool | None:
    """The tool to run, or the outcome of a call that must not run.

    ``calls_so_far`` of this response against ``cap``; ``turn_calls`` of the turn
    against ``turn_cap``. ``None`` when the tool is offered but has nothing to
    dispatch to (a plugin added it) and ``can_provide`` says a plugin may provide
    its result.
    """
    if calls_so_far >= cap:
        return refuse("tool_call_limit_exceeded",
                      f"at most {cap} tool calls per response; answer with what you have")
    if turn_cap is not None and turn_calls >= turn_cap:
        return refuse("tool_call_limit_exceeded",
                      f"at most {turn_cap} tool calls per turn; answer with what you have")
    if call.malformed is not None:
        content = f"tool_execution_error: TypeError: malformed tool call: {call.malformed}"
        return ToolOutcome("execution_error", content, True, 0.0, exc_type="TypeError",
                           reason_code="malformed_tool_call")
    tool = registry.get(call.name)
    if call.name not in offered or (tool is None and not can_provide):
        return unknown_tool(call, offered, registered=tool is not None)
    return tool


def unknown_tool(call: ToolCall, offered: frozenset[str], *,
                 registered: bool = False) -> ToolOutcome:
    """The outcome of a call to a tool that is not offered, or that nothing answered.

    Status ``unknown_tool`` for a name overt does not know (the model invented
    it: the audit tier records its digest); ``not_allowed`` for a registered
    tool this turn does not offer.
    """
    available = ", ".join(sorted(offered)) or "none"
    return refuse("not_allowed", f"unknown tool {call.name!r}; available tools: {available}",
                  "not_allowed" if registered else "unknown_tool")


Executor = Callable[[Tool, ToolCall, ToolContext, "float | None"], Awaitable["ToolOutcome"]]
"""What runs an allowed call's tool: :func:`execute`, or replay's recorded results."""


async def execute(tool: Tool, call: ToolCall, context: ToolContext,
                  default_timeout_s: float | None) -> ToolOutcome:
    """Run ``tool`` for ``call``; every failure becomes an error outcome."""
    timeout = tool.timeout_s if tool.timeout_s is not None else default_timeout_s
    started = time.perf_counter()
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            value = await tool.run(call.arguments, context)
    except TimeoutError as exc:
        if not deadline.expired():  # the tool's own TimeoutError: an execution error
            return _failed(exc, started)
        return ToolOutcome("timeout", f"tool_timeout: {tool.name} did not finish within "
                           f"{timeout:g}s", True, ms_since(started), exc_type="TimeoutError",
                           executed=True)
    except (Exception, SystemExit) as exc:  # noqa: BLE001  a tool's failure is the model's
        # to read; SystemExit too: a tool wrapping a script (argparse on bad arguments)
        # must not end the process that serves every other turn
        return _failed(exc, started)
    return ToolOutcome("ok", render_result(value), False, ms_since(started), executed=True)


def _failed(exc: BaseException, started: float) -> ToolOutcome:
    name = exc_type_name(exc)
    detail = str(exc).strip()
    content = f"tool_execution_error: {name}" + (f": {detail}" if detail else "")
    return ToolOutcome("execution_error", content, True, ms_since(started), exc_type=name,
                       executed=True)

