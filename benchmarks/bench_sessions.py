"""Building a turn's request from a 200-turn session, on each backend.

Target: under 5 ms on SQLite and on PostgreSQL.

What is timed is what :meth:`overt.runtime.Runtime.respond` does before the model
is called for a session that goes on: the session's history read back from the
ledger (every answered turn's message, its tool calls with their results, its
answer: :func:`overt.sessions.session_history`) and fitted into the model's window
(:func:`overt.sessions.fit`). The session has 200 turns, one in four with two tool
calls; 2,000 turns of 40 other sessions are recorded between them, so the session's
entries are spread through the ledger as a busy one spreads them. Two windows: one
that holds the whole session (a hosted model's 200,000 tokens), and the embedded
model's 4,096, where only the newest few turns fit.

Two reads: cold, the whole conversation read (a new process, ``overt ask
--session``); and continuing, as ``overt serve`` or ``overt chat`` does with its
:class:`overt.sessions.HistoryReader` after the previous turn was answered: the
ledger is asked how many conversation entries the session has now, and only the
new ones are read (the session then grows from 200 to 260 turns: one a run).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._pg import scratch_schema, unreachable
from benchmarks._stats import percentile, row
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from overt.sessions import HistoryReader, estimate_tokens, fit, session_history
from overt.tools.base import tool
from overt.types import IncomingMessage, Message, ModelRequest, ModelResponse, ToolCall

TURNS = 200
OTHER_SESSIONS = 40
OTHERS_PER_TURN = 10
RUNS = 60
TARGET_MS = 5.0


@tool(read_only=True)
async def lookup(key: str) -> dict[str, object]:
    """Look a key up."""
    return {"key": key, "value": len(key), "note": "a result of a typical size " * 4}


def _reply(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "user" and last.content.startswith("look"):
        return ModelResponse(text="", tool_calls=(
            ToolCall("c1", "lookup", {"key": "alpha"}), ToolCall("c2", "lookup", {"key": "b"})))
    return ModelResponse(text="Here is what I found about that, in a sentence or two. " * 2)


async def _fill(url: str) -> None:
    runtime = Runtime(model=FunctionModel(_reply), ledger=open_ledger(url), tools=[lookup])
    try:
        for n in range(TURNS):
            text = ("look up alpha and b" if n % 4 == 0 else
                    f"Question {n}: what changed on the host since the last deploy?")
            await runtime.respond(IncomingMessage("cli", text, {"session_id": "bench"}))
            for k in range(OTHERS_PER_TURN):
                other = f"other{(n * OTHERS_PER_TURN + k) % OTHER_SESSIONS}"
                await runtime.respond(IncomingMessage("cli", "hello", {"session_id": other}),
                                      history=())
    finally:
        await runtime.close()


async def _time(url: str) -> dict[str, list[float]]:
    ledger = open_ledger(url)
    runtime = Runtime(model=FunctionModel(_reply), ledger=open_ledger(url), tools=[lookup])
    fixed = [Message("system", "You are overt. " * 200), Message("user", "And now?")]
    samples: dict[str, list[float]] = {f"{read}, window {window:,}": []
                                       for read in ("cold", "continuing")
                                       for window in (200_000, 4_096)}
    reader = HistoryReader(ledger)
    await reader.history("cli:bench")

    async def timed(label: str, window: int) -> None:
        start = time.perf_counter_ns()
        history = (await reader.history("cli:bench") if label.startswith("continuing")
                   else await session_history(ledger, "cli:bench"))
        fitted = fit(history, fixed, (), window=window, reserve=1024, count=estimate_tokens)
        samples[f"{label}, window {window:,}"].append((time.perf_counter_ns() - start) / 1e6)
        assert len(history) >= TURNS, len(history)
        assert fitted.kept if window == 200_000 else fitted.omitted

    try:
        for _ in range(RUNS):  # the 200 turns as they are
            for window in (200_000, 4_096):
                await timed("cold", window)
        for run in range(RUNS):  # a turn answered (not timed), then the next one's request
            await runtime.respond(IncomingMessage(
                "cli", f"Question {run}: anything new?", {"session_id": "bench"}))
            for window in (200_000, 4_096):
                await timed("continuing", window)
    finally:
        await runtime.close()
        await ledger.close()
    return samples


def _report(backend: str, samples: dict[str, list[float]]) -> dict[str, float]:
    figures = {}
    for label, values in samples.items():
        median, p95 = statistics.median(values), percentile(values, 0.95)
        met = "met" if median < TARGET_MS else "NOT met"
        row(f"{backend}, {label}",
            f"median {median:6.2f} ms   p95 {p95:6.2f} ms   (target < {TARGET_MS:.0f} ms: {met})")
        figures[f"{backend}, {label}"] = median
    return figures


def main() -> dict[str, Any]:
    print(f"sessions: a turn's request built from a {TURNS}-turn session "
          f"(history from the ledger + window fit)")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "sessions.db")
        asyncio.run(_fill(url))
        figures.update(_report("SQLite", asyncio.run(_time(url))))
    if (why := unreachable()) is not None:
        row("PostgreSQL", f"skipped: {why}")
        return figures
    with scratch_schema("sessions") as (url, _):
        asyncio.run(_fill(url))
        figures.update(_report("PostgreSQL", asyncio.run(_time(url))))
    return figures


if __name__ == "__main__":
    main()
