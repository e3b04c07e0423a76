"""Replay speed, and what recording the request as sent costs in ledger size.

Replay: ``TURNS`` turns of 2 model calls and 2 tool calls each (a function model, each
turn the first of its session) are recorded, then replayed (``Runtime.replay``: the
ledger verified first, every request compared with the recorded one, the answers
and results read back from the record) on SQLite and PostgreSQL. Targets (issue
37): at least 1,000 turns/s on SQLite and 500 on PostgreSQL.

Size: one session of ``SESSION_TURNS`` turns, each with a tool call, a system prompt
offering 10 tools, the whole history sent each time, recorded with and without the
request bodies; the ledger's size is its SQLite file after ``VACUUM``. Target: the
bodies add at most 25 %.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import _pg
from benchmarks._stats import row
from overt.engine import loop
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from overt.tools.base import Tool, tool
from overt.types import IncomingMessage, ModelRequest, ModelResponse, ToolCall, Usage

TURNS = int(os.environ.get("OVERT_BENCH_REPLAY_TURNS", "10000"))
SESSION_TURNS = 200

_CALLS = (ToolCall("c1", "lookup", {"key": "alpha"}), ToolCall("c2", "lookup", {"key": "beta"}))
_FIRST = ModelResponse("", _CALLS, Usage(120, 20), "bench", "tool_use")
_FINAL = ModelResponse("alpha is 1, beta is 2", (), Usage(160, 12), "bench")


def _reply(request: ModelRequest) -> ModelResponse:
    return _FINAL if request.messages[-1].role == "tool" else _FIRST


@tool(read_only=True)
async def lookup(key: str) -> dict[str, object]:
    """Look a key up."""
    return {"key": key, "value": len(key)}


async def _record(ledger: Ledger, turns: int) -> Runtime:
    runtime = Runtime(model=FunctionModel(_reply), ledger=ledger, tools=[lookup])
    for n in range(turns):
        message = IncomingMessage("cli", "what are alpha and beta?", {"session_id": f"r{n}"})
        await runtime.respond(message, history=())
    return runtime


async def _replay(url: str, turns: int) -> tuple[float, float, int, int]:
    """Turns replayed per second (verify included, and without it), turns, divergences."""
    ledger = open_ledger(url)
    try:
        runtime = await _record(ledger, turns)
        start = time.perf_counter()
        report = await ledger.verify()
        verified = time.perf_counter()
        assert report.ok, report.problem
        count = divergent = 0
        from overt.replay import Replayer, select_turns

        chosen = await select_turns(ledger, since="")
        async for result in Replayer(runtime.engine, ledger).run(chosen):
            count += 1
            divergent += bool(result.divergences)
        done = time.perf_counter()
        return count / (done - start), count / (done - verified), count, divergent
    finally:
        await ledger.close()


def _tools() -> list[Tool]:
    made: list[Tool] = []
    for n in range(10):
        async def function(query: str, limit: int = 10) -> str:
            return f"result for {query}"
        function.__doc__ = (f"Tool number {n}: searches source {n} for the query and returns "
                            "the matching records, newest first, at most `limit` of them.")
        made.append(tool(read_only=True, name=f"search_{n}")(function))
    return made


async def _session(path: Path, *, bodies: bool) -> int:
    """The ledger's size in bytes after one session of SESSION_TURNS turns."""
    def reply(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "tool":
            return ModelResponse("Here is what I found: three records match.", (),
                                 Usage(900, 20), "bench")
        return ModelResponse("", (ToolCall("c", "search_3", {"query": "the invoices"}),),
                             Usage(800, 20), "bench", "tool_use")

    ledger = open_ledger(str(path))
    original = loop.Turn._request_digest
    if not bodies:
        loop.Turn._request_digest = lambda self, request, sent: None  # type: ignore[method-assign,assignment,return-value]
    try:
        runtime = Runtime(model=FunctionModel(reply), ledger=ledger, tools=_tools())
        for n in range(SESSION_TURNS):
            await runtime.respond(IncomingMessage("cli", f"find the invoices of month {n}",
                                                  {"session_id": "long"}))
    finally:
        loop.Turn._request_digest = original  # type: ignore[method-assign]
        await ledger.close()
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("VACUUM")
    return path.stat().st_size


def main() -> dict[str, Any]:
    logging.getLogger("overt").setLevel(logging.WARNING)
    print(f"replay ({TURNS:,} recorded turns of 2 model calls + 2 tool calls, answered "
          "from the record; verify of the ledger first)")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        rate, bare, count, divergent = asyncio.run(_replay(str(Path(tmp) / "r.db"), TURNS))
        row("SQLite file", f"{rate:8,.0f} turns/s ({bare:,.0f} without the verify); "
            f"{count:,} turns, {divergent} diverge")
        out["sqlite_turns_s"] = rate
    why = _pg.unreachable()
    if why is None:
        with _pg.scratch_schema("replay") as (url, _):
            rate, bare, count, divergent = asyncio.run(_replay(url, TURNS))
        row("PostgreSQL", f"{rate:8,.0f} turns/s ({bare:,.0f} without the verify); "
            f"{count:,} turns, {divergent} diverge")
        out["postgres_turns_s"] = rate
    else:
        row("PostgreSQL", f"skipped: {why}")
    row("target", ">= 1,000 turns/s SQLite, >= 500 PostgreSQL")
    print(f"ledger size with request bodies ({SESSION_TURNS}-turn session, 10 tools offered, "
          "whole history sent)")
    with tempfile.TemporaryDirectory() as tmp:
        without = asyncio.run(_session(Path(tmp) / "a.db", bodies=False))
        with_ = asyncio.run(_session(Path(tmp) / "b.db", bodies=True))
    overhead = (with_ - without) / without * 100
    row("without / with request bodies", f"{without / 1e6:.2f} MB / {with_ / 1e6:.2f} MB: "
        f"+{overhead:.1f} %")
    row("target", "<= +25 %")
    out["size_overhead_pct"] = overhead
    return out


if __name__ == "__main__":
    main()
