"""A worker process for concurrency tests and benchmarks.

``python benchmarks/workload.py URL TURNS CONCURRENCY [SESSION] [--wait]`` runs TURNS
turns (scripted model: 2 tool calls, then an answer) against the ledger at URL,
with CONCURRENCY turns in flight at once, as one ``overt serve`` worker would, then
prints ``done TURNS SECONDS START END`` (wall-clock times of its first and last turn).
With ``--wait`` it prints ``ready`` once imported and connected, and starts only
when a line arrives on standard input, so several workers start together and
their start-up is not timed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import (
    IncomingMessage,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
)


@tool(read_only=True)
async def lookup(key: str) -> dict[str, object]:
    """Look a key up."""
    return {"key": key, "value": len(key)}


def _reply(request: ModelRequest) -> ModelResponse:
    if request.messages[-1].role == "tool":
        return ModelResponse("found both", (), Usage(150, 10), "scripted")
    return ModelResponse("", (ToolCall("a", "lookup", {"key": "alpha"}),
                              ToolCall("b", "lookup", {"key": "beta"})),
                         Usage(100, 20), "scripted", "tool_use")


async def work(url: str, turns: int, concurrency: int, session: str,
               wait: bool = False) -> tuple[float, float, float]:
    ledger = open_ledger(url)
    runtime = Runtime(model=FunctionModel(_reply), ledger=ledger, tools=[lookup])
    await runtime.start()
    if wait:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(turns):
        queue.put_nowait(n)

    async def one_worker() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            result = await runtime.respond(IncomingMessage(
                "http", f"turn {n}", {"request_id": f"{session}-{n}"}),
                session_id=f"{session}-{n}")
            if result.error or result.tools_used != ["lookup", "lookup"]:
                raise SystemExit(f"turn {n} failed: {result}")

    start_wall, start = time.time(), time.perf_counter()
    await asyncio.gather(*(one_worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    end_wall = time.time()
    await runtime.close()
    return elapsed, start_wall, end_wall


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--wait"]
    url, turns, concurrency = args[0], int(args[1]), int(args[2])
    session = args[3] if len(args) > 3 else "load"
    seconds, began, ended = asyncio.run(work(url, turns, concurrency, session,
                                             wait="--wait" in sys.argv))
    print(f"done {turns} {seconds:.4f} {began:.6f} {ended:.6f}", flush=True)
