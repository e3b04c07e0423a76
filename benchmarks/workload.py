"""A worker process for concurrency tests and benchmarks.

``python benchmarks/workload.py URL TURNS CONCURRENCY [SESSION]`` runs TURNS turns
(scripted model: 2 tool calls, then an answer) against the ledger at URL, with
CONCURRENCY turns in flight at once, as one ``overt serve`` worker would, then
prints ``done TURNS SECONDS``.
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


async def work(url: str, turns: int, concurrency: int, session: str) -> float:
    ledger = open_ledger(url)
    runtime = Runtime(model=FunctionModel(_reply), ledger=ledger, tools=[lookup])
    await runtime.start()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(turns):
        queue.put_nowait(n)

    async def one_worker() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            result = await runtime.respond(IncomingMessage(
                "http", f"turn {n}", {"request_id": f"{session}-{n}"}), session_id=session)
            if result.error or result.tools_used != ["lookup", "lookup"]:
                raise SystemExit(f"turn {n} failed: {result}")

    start = time.perf_counter()
    await asyncio.gather(*(one_worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await runtime.close()
    return elapsed


if __name__ == "__main__":
    url, turns, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    session = sys.argv[4] if len(sys.argv) > 4 else "load"
    seconds = asyncio.run(work(url, turns, concurrency, session))
    print(f"done {turns} {seconds:.4f}", flush=True)
