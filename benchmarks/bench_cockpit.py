"""The cockpit's two figures, on SQLite.

1. The server time to render a 1,000-turn session page (target < 300 ms): a
   session of 1,000 turns (each with its thinking and plan steps, one in four
   with a tool call), the page ``GET /sessions/{id}`` served by the ASGI app in
   this process to a logged-in operator (it reads content, so the page holds
   every message, step, argument, result and answer), timed from the request to
   the last byte of the body (wall clock, and this process's CPU time beside it).
2. The delay from a record being appended to its row arriving on Live, with 20
   pages open (target < 1 s): uvicorn serves the cockpit on 127.0.0.1; 20 SSE
   clients (httpx) hold ``/live/stream``; each turn posted to the API appends its
   ``turn.started``; the delay is from that entry's ledger time (``at``) to each
   client's reading of an event holding the turn's row (the same clock).

3. (No target in the issue.) A text search on the Sessions page over that
   ledger: ``GET /sessions?q=...`` for a word no message or answer holds, so the
   database reads every one of the 2,000 bodies (1,000 messages, 1,000 answers).

``python -m benchmarks.bench_cockpit`` (or ``make bench``) prints them.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import uvicorn

from benchmarks._stats import percentile, row
from overt.channels.auth import Tokens, token_digest
from overt.channels.http import create_app
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import (
    IncomingMessage,
    ModelRequest,
    ModelResponse,
    ToolCall,
)
from overt.web import cockpit_routes

TURNS = 1000
RENDERS = 15
PAGES = 20
APPENDS = 15
RENDER_TARGET_MS = 300.0
LIVE_TARGET_MS = 1000.0
TOKEN = "ovt_bench-operator"
TOKENS = Tokens({token_digest(TOKEN): "operator:bench"})


@tool(read_only=True)
async def lookup(key: str) -> dict[str, object]:
    """Look a key up."""
    return {"key": key, "value": len(key)}


def _reply(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "user" and last.content.startswith("look"):
        return ModelResponse("", tool_calls=(ToolCall("c1", "lookup", {"key": "alpha"}),),
                             reasoning="[thinking] a key to look up\n[plan] 1. call lookup")
    return ModelResponse(f"An answer of a typical length to: {last.content[:40]}",
                         reasoning="[thinking] a plain question\n[plan] 1. answer it")


def _runtime(db: str) -> Runtime:
    return Runtime(model=FunctionModel(_reply), ledger=open_ledger(db), tools=[lookup])


async def _fill(db: str) -> str:
    runtime = _runtime(db)
    session = "bench:cockpit"
    try:
        for i in range(TURNS):
            text = f"look up item {i}" if i % 4 == 0 else f"question number {i} about the plan"
            await runtime.respond(IncomingMessage("cli", text, {}), session_id=session)
    finally:
        await runtime.close()
    return session


def _login(client: httpx.Client | httpx.AsyncClient, form: str) -> dict[str, str]:
    match = re.search(r'name="csrf" value="([^"]+)"', form)
    assert match, "no CSRF field on the login page"
    return {"token": TOKEN, "csrf": match.group(1)}


async def _render_times(db: str, session: str
                        ) -> tuple[list[float], list[float], list[float]]:
    """Wall-clock and CPU (this process, every thread) milliseconds of each render: on
    a shared machine the CPU time shows what the page costs when others wait for
    the cores too."""
    runtime = _runtime(db)
    app = create_app(runtime, TOKENS, extra_routes=cockpit_routes(runtime, TOKENS))
    times: list[float] = []
    cpus: list[float] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://bench") as client:
        login = await client.get("/login")
        await client.post("/login", data=_login(client, login.text))
        for _ in range(RENDERS):
            start, cpu = time.perf_counter(), time.process_time()
            page = await client.get(f"/sessions/{session}")
            times.append((time.perf_counter() - start) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
            assert page.status_code == 200 and page.text.count('class="turn-log"') == TURNS
        searches: list[float] = []
        for _ in range(RENDERS):
            start = time.perf_counter()
            found = await client.get("/sessions?q=a+word+said+nowhere")
            searches.append((time.perf_counter() - start) * 1000)
            assert found.status_code == 200 and "No sessions match" in found.text
        hit = await client.get("/sessions?q=QUESTION+NUMBER+999")
        assert session in hit.text, "the search did not find the session"
    await runtime.close()
    return times, cpus, searches


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{port}"


async def _live_delays(base: str, runtime: Runtime) -> list[float]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        login = await client.get("/login")
        await client.post("/login", data=_login(client, login.text))
        cookies = dict(client.cookies)
    seen: dict[str, list[float]] = {}
    ready = [asyncio.Event() for _ in range(PAGES)]

    async def page(i: int) -> None:
        async with httpx.AsyncClient(base_url=base, cookies=cookies, timeout=None) as c, \
                c.stream("GET", "/live/stream") as stream:
            async for line in stream.aiter_lines():
                if line.startswith("event: turns"):
                    ready[i].set()
                for marker in re.findall(r"bench-mark-\d+", line):
                    seen.setdefault(marker, []).append(time.time())

    tasks = [asyncio.create_task(page(i)) for i in range(PAGES)]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 30)
    delays: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=30,
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as api:
        for n in range(APPENDS):
            marker = f"bench-mark-{n}"
            answer = (await api.post("/v1/messages", json={"text": marker})).json()
            for _ in range(200):
                if len(seen.get(marker, [])) >= PAGES:
                    break
                await asyncio.sleep(0.01)
            started = await runtime.ledger.entries(turn_id=answer["turn_id"],
                                                   kinds=["turn.started"])
            at = datetime.fromisoformat(started[0].at.replace("Z", "+00:00")).timestamp()
            arrivals = seen.get(marker, [])
            assert len(arrivals) >= PAGES, f"{len(arrivals)} of {PAGES} pages saw {marker}"
            delays.extend((t - at) * 1000 for t in arrivals[:PAGES])
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return delays


def main() -> dict[str, Any]:
    print(f"cockpit: a {TURNS}-turn session page; Live with {PAGES} open pages")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "cockpit.db")
        started = time.perf_counter()
        session = asyncio.run(_fill(db))
        row("fill", f"{TURNS} turns recorded in {time.perf_counter() - started:.1f} s")
        times, cpus, searches = asyncio.run(_render_times(db, session))
        median = statistics.median(times[1:])  # the first warms the template cache
        figures["session_page_ms"] = median
        row(f"render a {TURNS}-turn session page",
            f"median {median:.0f} ms   best {min(times[1:]):.0f} ms   max "
            f"{max(times[1:]):.0f} ms   CPU median {statistics.median(cpus[1:]):.0f} ms   "
            f"(target < {RENDER_TARGET_MS:.0f} ms: "
            f"{'met' if median < RENDER_TARGET_MS else 'MISSED'})")
        figures["text_search_ms"] = statistics.median(searches[1:])
        row(f"text search, {2 * TURNS} bodies, no match",
            f"median {figures['text_search_ms']:.0f} ms   best {min(searches[1:]):.0f} ms   "
            f"max {max(searches[1:]):.0f} ms")

        runtime = _runtime(str(Path(tmp) / "live.db"))
        app = create_app(runtime, TOKENS, extra_routes=cockpit_routes(runtime, TOKENS))
        server, thread, base = _serve(app)
        try:
            delays = asyncio.run(_live_delays(base, runtime))
        finally:
            server.should_exit = True
            thread.join(30)
        p50, p95 = statistics.median(delays), percentile(delays, 0.95)
        figures["live_delay_ms"] = {"median": p50, "p95": p95, "max": max(delays)}
        row(f"append -> row on Live, {PAGES} pages",
            f"median {p50:.0f} ms   p95 {p95:.0f} ms   max {max(delays):.0f} ms   "
            f"(n={len(delays)}; target < {LIVE_TARGET_MS:.0f} ms: "
            f"{'met' if max(delays) < LIVE_TARGET_MS else 'MISSED'})")
    return figures


if __name__ == "__main__":
    main()
