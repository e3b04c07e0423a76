"""What the hook machinery costs per tool call.

A ledger that keeps nothing and a function model (no inference cost), so what
is measured is the engine and its hooks. Per tool call: the engine's own
tool-call step, timed alone (hooks, record, dispatch of an inline tool, the
``on_event`` delivery of its two events). Per turn: 2 model calls and 1 tool
call. Measured with no plugin (only the built-in one, which implements no
per-turn hook) and with 5 no-op plugins that implement every hook the engine
calls during a turn, including ``on_event``, once as ``def`` and once as
``async def``. Configurations take turns, and each figure is the quietest
block's median: on a shared machine interference only ever adds time.
Target: 5 no-op plugins add under 20 µs per tool call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from benchmarks._stats import quietest, row, summary
from overt.engine.loop import Engine, Turn
from overt.engine.values import EngineSettings
from overt.events import Event
from overt.hooks import PluginHost, hookimpl
from overt.ledger.base import Entry, Ledger
from overt.models.fake import FunctionModel
from overt.policy.actors import Actor
from overt.tools.base import tool
from overt.tools.registry import ToolRegistry
from overt.types import IncomingMessage, ModelResponse, ToolCall, Usage

ROUNDS = 9
STEPS = 1000
BLOCK = 200
FEW = 1
PLUGINS = 5
NONE, SYNC, ASYNC = "no plugins", f"{PLUGINS} no-op plugins", f"{PLUGINS} async no-op"


class NullLedger:
    """Keeps nothing: the ledger's cost is bench_ledger's subject, not this one's."""

    async def record(self, events: Sequence[Event],
                     contents: Mapping[str, str] | None = None) -> list[Entry]:
        return []


@tool(read_only=True, inline=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return key


class NoOp:
    """Implements every per-turn hook and ``on_event``, and does nothing."""

    @hookimpl
    def pre_api_request(self, request: Any) -> None: ...
    @hookimpl
    def pre_tool_list_finalized(self, tools: Any) -> None: ...
    @hookimpl
    def post_api_request(self, response: Any) -> None: ...
    @hookimpl
    def post_llm_call_can_reissue(self, response: Any) -> None: ...
    @hookimpl
    def transform_llm_output(self, text: str) -> None: ...
    @hookimpl
    def pre_tool_call(self, tool_name: str, args: Any) -> None: ...
    @hookimpl
    def pre_tool_call_can_provide_result(self, tool_name: str, args: Any) -> None: ...
    @hookimpl
    def post_tool_call(self, tool_name: str, result: str) -> None: ...
    @hookimpl
    def transform_tool_result(self, tool_name: str, result: str) -> None: ...
    @hookimpl
    def on_event(self, event: Event) -> None: ...


class AsyncNoOp:
    """The same, as ``async def`` implementations."""

    @hookimpl
    async def pre_api_request(self, request: Any) -> None: ...
    @hookimpl
    async def pre_tool_list_finalized(self, tools: Any) -> None: ...
    @hookimpl
    async def post_api_request(self, response: Any) -> None: ...
    @hookimpl
    async def post_llm_call_can_reissue(self, response: Any) -> None: ...
    @hookimpl
    async def transform_llm_output(self, text: str) -> None: ...
    @hookimpl
    async def pre_tool_call(self, tool_name: str, args: Any) -> None: ...
    @hookimpl
    async def pre_tool_call_can_provide_result(self, tool_name: str, args: Any) -> None: ...
    @hookimpl
    async def post_tool_call(self, tool_name: str, result: str) -> None: ...
    @hookimpl
    async def transform_tool_result(self, tool_name: str, result: str) -> None: ...
    @hookimpl
    async def on_event(self, event: Event) -> None: ...


CONFIGS: dict[str, type | None] = {NONE: None, SYNC: NoOp, ASYNC: AsyncNoOp}


def _model(calls: int) -> FunctionModel:
    first = ModelResponse("", tuple(ToolCall(f"c{i}", "lookup", {"key": "k"})
                                    for i in range(calls)), Usage(100, 10), "bench", "tool_use")
    final = ModelResponse("done", (), Usage(120, 5), "bench")
    return FunctionModel(lambda r: final if r.messages[-1].role == "tool" else first)


def _host(plugin: type | None) -> PluginHost:
    host = PluginHost.builtin_only()
    for n in range(PLUGINS if plugin is not None else 0):
        host.register(plugin(), f"noop{n}")  # type: ignore[misc]
    return host


async def _turns(host: PluginHost, calls: int, turns: int) -> list[float]:
    tools = ToolRegistry([lookup])
    host.add_tools(tools)
    model = _model(calls)
    engine = Engine(model, tools, cast(Ledger, NullLedger()), hooks=host.hooks,
                    settings=EngineSettings(max_tool_calls=calls))
    message = IncomingMessage("cli", "q", {"session_id": "bench"})
    samples = []
    for _ in range(turns):
        start = time.thread_time_ns()
        outcome = await engine.run_turn(message, actor=Actor.operator())
        samples.append((time.thread_time_ns() - start) / 1000)
        model.requests.clear()
        assert outcome.result.tools_used == ["lookup"] * calls, outcome.result
    return samples


async def _tool_steps(host: PluginHost, steps: int) -> list[float]:
    """The engine's own step for one tool call (``Turn._tool_call``), timed alone."""
    tools = ToolRegistry([lookup])
    host.add_tools(tools)
    engine = Engine(_model(1), tools, cast(Ledger, NullLedger()), hooks=host.hooks,
                    settings=EngineSettings(max_tool_calls=10**9,
                                            max_tool_calls_per_turn=10**9))
    turn = Turn(engine, "cli", "cli:bench", "bench")
    call, offered = ToolCall("c1", "lookup", {"key": "k"}), frozenset({"lookup"})
    samples = []
    for _ in range(steps):
        start = time.perf_counter_ns()
        outcome = await turn._tool_call(call, offered)
        samples.append((time.perf_counter_ns() - start) / 1000)
        turn.tools_used.clear()
        assert outcome.status == "ok", outcome
    return samples


def _interleaved(measure: Callable[[PluginHost], list[float]]) -> dict[str, list[list[float]]]:
    """Per configuration, ROUNDS blocks of samples, the configurations taking turns
    (so a busy neighbour weighs on all of them alike)."""
    hosts = {name: _host(plugin) for name, plugin in CONFIGS.items()}
    for host in hosts.values():
        measure(host)
    found: dict[str, list[list[float]]] = {name: [] for name in CONFIGS}
    for _ in range(ROUNDS):
        for name, host in hosts.items():
            found[name].append(measure(host))
    return found


def main() -> dict[str, float]:
    logging.getLogger("overt").setLevel(logging.WARNING)
    print(f"hook machinery (function model, null ledger; {ROUNDS} interleaved rounds; "
          f"no-op plugins implement every per-turn hook and on_event)")
    steps = _interleaved(lambda host: asyncio.run(_tool_steps(host, STEPS)))
    per_call = {name: quietest(blocks) for name, blocks in steps.items()}
    for name, blocks in steps.items():
        row(f"tool call step, {name}", summary([x for b in blocks for x in b]))
    base = per_call[NONE]
    for name in (SYNC, ASYNC):
        row(f"added per tool call by {name}", f"{per_call[name] - base:8.1f} µs   "
            f"(quietest block medians {per_call[name]:.1f} vs {base:.1f} µs)")
    turns = _interleaved(lambda host: asyncio.run(_turns(host, FEW, BLOCK)))
    per_turn = {name: quietest(blocks) for name, blocks in turns.items()}
    for name, blocks in turns.items():
        row(f"turn (2 model + 1 tool call), {name}", summary([x for b in blocks for x in b]))
    for name in (SYNC, ASYNC):
        row(f"added per such turn by {name}", f"{per_turn[name] - per_turn[NONE]:8.1f} µs")
    row("target", f"{PLUGINS} no-op (def) plugins add < 20 µs per tool call")
    return {"hooks_tool_call_us_0": base, "hooks_tool_call_us_5": per_call[SYNC],
            "hooks_added_per_call_us_5": per_call[SYNC] - base,
            "hooks_added_per_call_us_5_async": per_call[ASYNC] - base,
            "hooks_turn_us_0": per_turn[NONE],
            "hooks_added_per_turn_us_5": per_turn[SYNC] - per_turn[NONE]}


if __name__ == "__main__":
    main()
