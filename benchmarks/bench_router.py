"""What the cheap-first router costs per escalated turn, beyond the two model calls.

Function models (no inference cost) and a ledger that keeps nothing, so what
is measured is the engine and the router. An escalated turn: the cheap model
hedges, the ``router`` plugin judges the answer and has it reissued to the
strong model, which answers. The router's own overhead is that turn minus the
same turn escalated by a plugin with no rule (it returns a fixed ``Reissue``):
both take the same engine path (two model calls, ``hook.reissued``, two
inference records), so the difference is the router's judging and the context
it writes. Also shown: the decision alone (the hook called directly), and a
confident answer the router lets through, against no plugin at all.
Configurations take turns; each figure is the quietest block's median.
Target: the router adds under 50 µs per escalated turn.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from benchmarks._stats import quietest, row, summary
from overt.engine.loop import Engine
from overt.engine.values import EngineSettings
from overt.events import Event
from overt.hooks import PluginHost, Reissue, hookimpl
from overt.hooks.router import RouterPlugin
from overt.ledger.base import Entry, Ledger
from overt.models.fake import FunctionModel
from overt.models.router import EscalationRule
from overt.policy.actors import Actor
from overt.tools.registry import ToolRegistry
from overt.types import IncomingMessage, Message, ModelRequest, ModelResponse, Usage

ROUNDS = 9
BLOCK = 300
DECISIONS = 5000
HEDGED = ("Let me think. The capital of Australia is Sydney, I believe, although I'm not "
          "entirely sure about that; it might be Canberra.")
CONFIDENT = "The capital of Australia is Canberra."
ROUTER, FIXED, NONE, LET_THROUGH = ("router", "fixed reissue (no rule)", "no plugin",
                                    "router, confident answer")


class NullLedger:
    """Keeps nothing: the ledger's cost is bench_ledger's subject, not this one's."""

    async def record(self, events: Sequence[Event],
                     contents: Mapping[str, str] | None = None) -> list[Entry]:
        return []


class FixedReissue:
    """Escalates every cheap answer with a fixed directive: the engine path, no rule."""

    @hookimpl
    def post_llm_call_can_reissue(self, model: str) -> Reissue | None:
        if model != "cheap":
            return None
        return Reissue(model="strong", context="check this", reason_code="fixed")


def _engine(plugin: object | None, cheap_text: str) -> Engine:
    host = PluginHost()
    if plugin is not None:
        host.register(plugin, "plugin")
    cheap_reply = ModelResponse(cheap_text, (), Usage(100, 30), "cheap")
    strong_reply = ModelResponse("Canberra.", (), Usage(140, 5), "strong")
    cheap = FunctionModel(lambda r: cheap_reply, name="cheap")
    strong = FunctionModel(lambda r: strong_reply, name="strong")
    models = {"strong": strong}
    return Engine(cheap, ToolRegistry(), cast(Ledger, NullLedger()), hooks=host.hooks,
                  models=models.__getitem__, settings=EngineSettings())


CONFIGS: dict[str, Callable[[], Engine]] = {
    ROUTER: lambda: _engine(RouterPlugin("strong", EscalationRule(), cheap="cheap"), HEDGED),
    FIXED: lambda: _engine(FixedReissue(), HEDGED),
    LET_THROUGH: lambda: _engine(RouterPlugin("strong", EscalationRule(), cheap="cheap"),
                                 CONFIDENT),
    NONE: lambda: _engine(None, CONFIDENT),
}


async def _turns(engine: Engine, turns: int) -> list[float]:
    message = IncomingMessage("cli", "What is the capital of Australia?",
                              {"session_id": "bench"})
    samples = []
    for _ in range(turns):
        start = time.thread_time_ns()
        outcome = await engine.run_turn(message, actor=Actor.operator())
        samples.append((time.thread_time_ns() - start) / 1000)
        assert outcome.result.error is None, outcome.result
    return samples


def _decisions(count: int) -> list[float]:
    """The router's hook alone, per escalated answer (judge, context, directive)."""
    plugin = RouterPlugin("strong", EscalationRule(), cheap="cheap")
    request = ModelRequest((Message("system", "You are overt."),
                            Message("user", "What is the capital of Australia?")))
    response = ModelResponse(HEDGED, (), Usage(100, 30), "cheap")
    samples = []
    for _ in range(count):
        start = time.perf_counter_ns()
        answer = plugin.post_llm_call_can_reissue(request, response, "cheap", "default")
        samples.append((time.perf_counter_ns() - start) / 1000)
        assert answer is not None
    return samples


def main() -> dict[str, float]:
    logging.getLogger("overt").setLevel(logging.WARNING)
    print(f"router (function models, null ledger; {ROUNDS} interleaved rounds of {BLOCK} "
          f"turns)")
    engines = {name: make() for name, make in CONFIGS.items()}
    for engine in engines.values():
        asyncio.run(_turns(engine, 20))
    blocks: dict[str, list[list[float]]] = {name: [] for name in engines}
    for _ in range(ROUNDS):
        for name, engine in engines.items():
            blocks[name].append(asyncio.run(_turns(engine, BLOCK)))
    per_turn = {name: quietest(b) for name, b in blocks.items()}
    for name, b in blocks.items():
        row(f"turn, {name}", summary([x for block in b for x in block]))
    decision = _decisions(DECISIONS)
    row("router decision alone (escalating)", summary(decision))
    added = per_turn[ROUTER] - per_turn[FIXED]
    row("router's own overhead per escalated turn", f"{added:8.1f} µs   (quietest block "
        f"medians {per_turn[ROUTER]:.1f} vs {per_turn[FIXED]:.1f} µs)")
    row("router on a confident turn (not escalated)",
        f"{per_turn[LET_THROUGH] - per_turn[NONE]:8.1f} µs over no plugin")
    row("target", "the router adds < 50 µs per escalated turn")
    return {"router_escalated_turn_us": per_turn[ROUTER],
            "router_fixed_reissue_turn_us": per_turn[FIXED],
            "router_overhead_per_escalated_turn_us": added,
            "router_decision_us": statistics.median(decision),
            "router_confident_turn_added_us": per_turn[LET_THROUGH] - per_turn[NONE]}


if __name__ == "__main__":
    main()
