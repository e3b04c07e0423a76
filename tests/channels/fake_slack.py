"""Local servers for the Slack tests: a Slack Web API speaking Slack's documented wire
format for ``chat.postMessage``, and uvicorn serving overt's Events API endpoint."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from aiohttp import web
from starlette.applications import Starlette
from starlette.routing import Route


@dataclass
class FakeSlack:
    """Posted messages, in order; ``fail_with`` makes the next calls answer ``ok: false``."""

    token: str
    base_url: str = ""
    posts: list[dict[str, Any]] = field(default_factory=list)
    fail_with: str | None = None
    posted: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_for_posts(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        async def enough() -> None:
            while len(self.posts) < count:
                self.posted.clear()
                await self.posted.wait()
        await asyncio.wait_for(enough(), timeout)
        return self.posts

    async def post_message(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        raw = await request.read()
        if request.content_type == "application/json":
            args = json.loads(raw)
        else:
            args = dict(parse_qsl(raw.decode()))
        if self.fail_with:
            return web.json_response({"ok": False, "error": self.fail_with})
        if not args.get("channel") or not args.get("text"):
            return web.json_response({"ok": False, "error": "no_text"})
        ts = f"1700000000.{len(self.posts) + 1:06d}"
        self.posts.append(dict(args, ts=ts))
        self.posted.set()
        return web.json_response({"ok": True, "channel": args["channel"], "ts": ts,
                                  "message": {"type": "message", "text": args["text"],
                                              "ts": ts, "bot_id": "B0BOT"}})


@asynccontextmanager
async def fake_slack_api(token: str) -> AsyncIterator[FakeSlack]:
    fake = FakeSlack(token)
    app = web.Application()
    app.router.add_post("/api/chat.postMessage", fake.post_message)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    fake.base_url = f"http://127.0.0.1:{port}/api/"
    try:
        yield fake
    finally:
        await runner.cleanup()


@asynccontextmanager
async def serve(routes: list[Route]) -> AsyncIterator[str]:
    """Serve ``routes`` with uvicorn on a free local port; the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes), log_level="warning",
                                           lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not server.started:
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
