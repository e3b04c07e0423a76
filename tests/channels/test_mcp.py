"""The MCP server with the official client: in-process, over stdio, over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from overt.channels.http import create_app
from overt.channels.mcp_server import create_server
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.policy.actors import Actor
from overt.runtime import Runtime
from tests.channels.helpers import APPROVER, CLIENT, TOKENS, USAGE_CALL, auth, make_runtime
from tests.conftest import run

STATE_CALL = {"tool_calls": [{"name": "get_operational_state", "arguments": {}}]}
SRC = str(Path(__file__).resolve().parents[2] / "src")


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


def tool_calls(ledger: Ledger, turn_id: str) -> list[str]:
    return [e.data["tool_name"] for e in run(ledger.entries(
        turn_id=turn_id, kinds=["tool_call.completed"]))]


def test_the_server_offers_the_channel_tools_and_the_memory_tools(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[str]:
        server = create_server(make_runtime(ledger, tmp_path, []))
        async with Client(server) as client:
            return [t.name for t in (await client.list_tools()).tools]
    names = run(main())
    assert {"ask", "trail", "approvals_list", "approve", "deny", "node_create",
            "node_search"} <= set(names)


def test_ask_in_process_is_a_turn_from_mcp_and_trail_is_audited(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, Any], Any]:
        rt = make_runtime(ledger, tmp_path, [STATE_CALL, "All is well."])
        server = create_server(rt, actor=Actor("mcp_client", "claude-code"))
        async with Client(server) as client:
            answer = structured(await client.call_tool("ask", {"text": "status?",
                                                              "session_id": "m1"}))
            trail = await client.call_tool("trail", {"session_id": "m1"})
            refused = await client.call_tool("approve", {"request_id": "x"})
            return answer, (trail, refused)
    answer, (trail, refused) = run(main())
    assert answer["text"] == "All is well." and answer["tools_used"] == ["get_operational_state"]
    assert tool_calls(ledger, answer["turn_id"]) == ["get_operational_state"]
    started = run(ledger.entries(turn_id=answer["turn_id"], kinds=["turn.started"]))[0].data
    assert (started["source"], started["caller_session_id"]) == ("mcp", "mcp:claude-code:ask")
    assert structured(trail)["turns"][0]["turn_id"] == answer["turn_id"]
    assert refused.is_error
    checks = [e.data for e in run(ledger.entries(kinds=["capability.checked"]))]
    assert {"actor": "mcp_client:claude-code", "capability": "trail.read", "granted": True,
            "subject": "mcp:claude-code:trail"}.items() <= checks[0].items()
    line = json.loads((tmp_path / "transcript.jsonl").read_text().splitlines()[-1])
    assert (line["source"], line["caller_session_id"], line["tools_used"]) == (
        "mcp", "mcp:claude-code:ask", ["get_operational_state"])


def test_ask_over_stdio_with_the_official_client(tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps(STATE_CALL) + "\n" + json.dumps({"text": "Fine."}) + "\n")
    db = tmp_path / "ledger.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "overt.cli", "--db", str(db), "mcp", "--model", f"scripted:{replies}",
              "--actor", "mcp_client:claude-code"],
        env={**os.environ, "PYTHONPATH": SRC, "OVERT_TRANSCRIPT": str(tmp_path / "t.jsonl")},
        cwd=str(tmp_path))

    async def main() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            return structured(await client.call_tool("ask", {"text": "status?"}))
    answer = run(main())
    assert answer["text"] == "Fine." and answer["tools_used"] == ["get_operational_state"]
    ledger = open_ledger(str(db))
    try:
        assert tool_calls(ledger, answer["turn_id"]) == ["get_operational_state"]
        assert run(ledger.verify()).ok
    finally:
        ledger.close_sync()  # type: ignore[attr-defined]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Runtime, Path]]:
    """A real uvicorn server: the HTTP API and MCP at /mcp, on a free port."""
    db = tmp_path / "ledger.db"
    rt = make_runtime(open_ledger(str(db)), tmp_path, [
        STATE_CALL, "All is well.", USAGE_CALL, "You used 0 tokens."])
    mcp = create_server(rt)
    app = create_app(rt, TOKENS, mcp=mcp.streamable_http_app(host="127.0.0.1"),
                     mcp_lifespan=mcp.session_manager.run)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = threading.Event()
    for _ in range(1000):
        if server.started:
            started.set()
            break
        started.wait(0.01)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}", rt, db
    server.should_exit = True
    thread.join(30)
    assert not thread.is_alive()


def mcp_client(base: str, token: str) -> Client:
    http = httpx.AsyncClient(headers=auth(token), timeout=60)
    return Client(streamable_http_client(f"{base}/mcp", http_client=http))


def test_over_http_an_ask_held_for_approval_is_approved_over_mcp_and_answered_on_http(
        served: tuple[str, Runtime, Path]) -> None:
    base, _rt, db = served

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with mcp_client(base, CLIENT) as client:
            first = structured(await client.call_tool("ask", {"text": "status?"}))
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            no_token = await http.post("/mcp", json={})
            assert no_token.status_code == 401
            asking = asyncio.create_task(http.post(
                "/v1/messages", json={"text": "usage?", "wait_s": 60}, headers=auth(CLIENT)))
            async with mcp_client(base, APPROVER) as client:
                pending: list[Any] = []
                for _ in range(1000):
                    pending = structured(await client.call_tool(
                        "approvals_list", {}))["approvals"]
                    if pending:
                        break
                    await asyncio.sleep(0.02)
                decided = structured(await client.call_tool(
                    "approve", {"request_id": pending[0]["request_id"], "reason": "ok"}))
            answered = (await asyncio.wait_for(asking, 60)).json()
        return first, decided, answered

    first, decided, answered = run(main())
    assert first["text"] == "All is well."
    assert decided["request"]["decided_by"] == "mcp_client:approver"
    assert answered["text"] == "You used 0 tokens." and answered["tools_used"] == ["get_usage"]
    ledger = open_ledger(str(db))
    try:
        assert tool_calls(ledger, first["turn_id"]) == ["get_operational_state"]
        assert tool_calls(ledger, answered["turn_id"]) == ["get_usage"]
        started = run(ledger.entries(turn_id=answered["turn_id"], kinds=["turn.started"]))
        assert started[0].data["caller_session_id"] == f"http:{answered['request_id']}"
        assert run(ledger.verify()).ok
    finally:
        ledger.close_sync()  # type: ignore[attr-defined]


def test_a_memory_tool_over_mcp_runs_through_the_gate_as_the_client(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[Any, Any]:
        server = create_server(make_runtime(ledger, tmp_path, []),
                               actor=Actor("mcp_client", "claude-code"))
        async with Client(server) as client:
            found = await client.call_tool("node_search", {"query": "anything"})
            written = await client.call_tool("node_create",
                                             {"kind": "Note", "title": "x", "body": "y"})
            return found, written
    found, written = run(main())
    assert not found.is_error
    assert written.is_error and "memory.write" in written.content[0].text  # not granted
    decisions = [e.data for e in run(ledger.entries(kinds=["policy.decision"]))]
    assert [(d["tool_name"], d["actor"]) for d in decisions][:1] == [
        ("node_search", "mcp_client:claude-code")]
    calls = [e.data for e in run(ledger.entries(kinds=["tool_call.completed"]))]
    assert [(c["tool_name"], c["triggered_by"], c["caller_session_id"]) for c in calls] == [
        ("node_search", "mcp", "mcp:claude-code:node_search"),
        ("node_create", "mcp", "mcp:claude-code:node_create")]
