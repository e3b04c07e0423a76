"""overt's own overhead per turn.

A turn of 2 model calls and 2 tool calls, driven by a function model (no
inference cost), with every record committed to a real SQLite file in WAL mode
(by the ledger's writer thread, each batch committed before the turn goes on),
the transcript line written, and the audit log line emitted. Next to it, a bare
Python loop doing the same model and tool calls with no record. It has no
target: the figure is overt's cost per turn, compared across changes.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._stats import row, summary
from overt.channels.transcript import Transcript
from overt.ledger.sqlite import SqliteLedger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import IncomingMessage, Message, ModelRequest, ModelResponse, ToolCall, Usage

TURNS = 2000
WARMUP = 200
ROUNDS = 3  # the best round is reported: other load on a shared machine only adds time

_CALLS = (ToolCall("c1", "lookup", {"key": "alpha"}), ToolCall("c2", "lookup", {"key": "beta"}))
_FIRST = ModelResponse("", _CALLS, Usage(120, 20), "bench", "tool_use")
_FINAL = ModelResponse("alpha is 1, beta is 2", (), Usage(160, 12), "bench")


def _reply(request: ModelRequest) -> ModelResponse:
    return _FINAL if request.messages[-1].role == "tool" else _FIRST


@tool(read_only=True)
async def lookup(key: str) -> dict[str, object]:
    """Look a key up."""
    return {"key": key, "value": len(key)}


async def _bare_loop(turns: int) -> list[float]:
    """The same model and tool calls, no validation, no record."""
    model = FunctionModel(_reply)
    samples = []
    for _ in range(turns):
        start = time.perf_counter_ns()
        messages = [Message("user", "q")]
        response = await model.complete(ModelRequest(tuple(messages)))
        for call in response.tool_calls:
            result = await lookup.function(**call.arguments)
            messages.append(Message("tool", str(result), tool_call_id=call.id))
        await model.complete(ModelRequest(tuple(messages)))
        model.requests.clear()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


async def timed_turns(runtime: Runtime, model: FunctionModel, turns: int) -> list[float]:
    """Each turn's time in µs, the same question ``turns`` times (``model`` answers it),
    each the first turn of a new session, as ``overt ask`` and a new HTTP or MCP
    session answer it (no history to read; a session that goes on adds the read
    ``bench_sessions`` times)."""
    samples = []
    for n in range(turns):
        message = IncomingMessage("cli", "what are alpha and beta?", {"session_id": f"b{n}"})
        start = time.perf_counter_ns()
        result = await runtime.respond(message, history=())
        samples.append((time.perf_counter_ns() - start) / 1000)
        model.requests.clear()
        assert result.tools_used == ["lookup", "lookup"], result
    return samples


async def _overt(turns: int, directory: Path) -> tuple[list[float], SqliteLedger]:
    ledger = SqliteLedger.open(directory / "bench.db")
    model = FunctionModel(_reply)
    runtime = Runtime(model=model, ledger=ledger, tools=[lookup],
                      transcript=Transcript(directory / "transcript.jsonl"))
    return await timed_turns(runtime, model, turns), ledger


def _round(directory: Path) -> tuple[list[float], float, int, bool]:
    """One round's turn samples, its turns per second, and what ``verify`` then says."""
    directory.mkdir()
    asyncio.run(_overt(WARMUP, directory))[1].close_sync()
    start = time.perf_counter()
    samples, ledger = asyncio.run(_overt(TURNS, directory))
    rate = TURNS / (time.perf_counter() - start)
    report = ledger.verify_sync()
    ledger.close_sync()
    return samples, rate, report.entries, report.ok


def main() -> dict[str, float]:
    logging.getLogger("overt").setLevel(logging.WARNING)
    print("turn overhead (2 model calls + 2 tool calls, scripted model, SQLite WAL file, "
          f"best of {ROUNDS} rounds of {TURNS} turns)")
    bare_rounds: list[list[float]] = []
    rounds: list[tuple[list[float], float]] = []
    entries, ok = 0, True
    for n in range(ROUNDS):
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(_bare_loop(WARMUP))
            bare_rounds.append(asyncio.run(_bare_loop(TURNS)))
            samples, rate, entries, round_ok = _round(Path(tmp) / str(n))
            rounds.append((samples, rate))
            ok = ok and round_ok
    bare = min(bare_rounds, key=statistics.median)
    best = min((r[0] for r in rounds), key=statistics.median)
    row("bare Python loop, no record", summary(bare))
    row("overt turn, every record committed", summary(best))
    row("  medians of each round", ", ".join(f"{statistics.median(r):.0f} µs"
                                            for r, _ in rounds))
    row("  mean", f"{statistics.mean(best):8.1f} µs; "
        f"{max(r for _, r in rounds):,.0f} turns/s")
    overhead = statistics.median(best) - statistics.median(bare)
    row("overt's own overhead (median difference)", f"{overhead:8.1f} µs")
    row("target", "median overt turn <= 1 ms")
    row("ledger after the last round", f"{entries} entries, verify ok={ok}")
    return {"turn_median_us": statistics.median(best),
            "bare_median_us": statistics.median(bare)}


if __name__ == "__main__":
    main()
