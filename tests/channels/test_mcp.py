"""The MCP server with the official client: in-process, over stdio, over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from overt.channels.http import create_app
from overt.channels.mcp_server import create_server
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.policy.actors import Actor
from overt.runtime import Runtime
from tests.channels.helpers import (
    APPROVER,
    CLIENT,
    OTHER,
    TOKENS,
    USAGE_CALL,
    auth,
    echo_model,
    make_runtime,
    said,
    uvicorn_server,
)
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


def test_an_argument_a_tool_does_not_declare_is_an_error_result_naming_it(
        ledger: Ledger, tmp_path: Path) -> None:
    """``sesion`` for ``session_id`` would otherwise start a new conversation."""
    async def main() -> tuple[Any, ...]:
        rt = make_runtime(ledger, tmp_path, ["first", "second"])
        server = create_server(rt, actor=Actor("mcp_client", "claude-code"))
        async with Client(server) as client:
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            first = structured(await client.call_tool("ask", {"text": "hi"}))
            typo = await client.call_tool("ask", {"text": "and then?",
                                                  "sesion": first["session_id"]})
            search = await client.call_tool("node_search", {"query": "x", "limt": 2})
            return schemas, typo, search
    schemas, typo, search = run(main())
    assert all(s["additionalProperties"] is False for s in schemas.values()), schemas
    assert typo.is_error and "'sesion'" in typo.content[0].text
    assert "session_id" in typo.content[0].text
    assert search.is_error and "'limt'" in search.content[0].text
    assert run(ledger.count("turn.started")) == 1  # the first ask's only
    assert run(ledger.count("tool_call.started")) == 0


def test_ask_in_process_is_a_turn_from_mcp_and_trail_is_audited(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, Any], Any]:
        rt = make_runtime(ledger, tmp_path, [STATE_CALL, "All is well."])
        server = create_server(rt, actor=Actor("mcp_client", "claude-code"))
        async with Client(server) as client:
            answer = structured(await client.call_tool("ask", {"text": "status?"}))
            trail = await client.call_tool("trail", {"session_id": answer["session_id"]})
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


@pytest.mark.slow
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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Runtime, Path]]:
    """A real uvicorn server: the HTTP API and MCP at /mcp, on a free port."""
    db = tmp_path / "ledger.db"
    rt = make_runtime(open_ledger(str(db)), tmp_path, [
        STATE_CALL, "All is well.", USAGE_CALL, "You used 0 tokens."])
    mcp = create_server(rt)
    app = create_app(rt, TOKENS, mcp=mcp.streamable_http_app(host="127.0.0.1"),
                     mcp_lifespan=mcp.session_manager.run)
    with uvicorn_server(app) as base:
        yield base, rt, db


def mcp_client(base: str, token: str) -> Client:
    http = httpx.AsyncClient(headers=auth(token), timeout=60)
    return Client(streamable_http_client(f"{base}/mcp", http_client=http))


@pytest.mark.slow
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


def test_ask_without_a_session_id_starts_a_new_session_and_with_one_continues_it(
        ledger: Ledger, tmp_path: Path) -> None:
    model = echo_model()

    async def main() -> list[dict[str, Any]]:
        server = create_server(make_runtime(ledger, tmp_path, model),
                               actor=Actor("mcp_client", "claude-code"))
        async with Client(server) as client:
            first = structured(await client.call_tool("ask", {"text": "my name is Ada"}))
            other = structured(await client.call_tool("ask", {"text": "hello"}))
            again = structured(await client.call_tool("ask", {
                "text": "what is my name?", "session_id": first["session_id"]}))
            return [first, other, again]
    first, other, again = run(main())
    assert first["session_id"] != other["session_id"]  # not one session per caller kind
    assert again["session_id"] == first["session_id"]
    assert said(model.requests[1]) == [("user", "hello")]
    assert said(model.requests[2]) == [("user", "my name is Ada"),
                                       ("assistant", "re: my name is Ada"),
                                       ("user", "what is my name?")]


def refusal(result: Any) -> str:
    assert result.is_error and result.structured_content is None
    return str(result.content[0].text)


def test_another_clients_session_and_approval_look_missing_over_mcp(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = make_runtime(ledger, tmp_path, [USAGE_CALL])

    async def main() -> tuple[list[tuple[str, str]], dict[str, Any], dict[str, Any]]:
        async with Client(create_server(rt, actor=Actor("mcp_client", "claude-code"))) as owner:
            held = structured(await owner.call_tool("ask", {"text": "usage?"}))
            mine = structured(await owner.call_tool("approvals_list", {}))
        async with Client(create_server(rt, actor=Actor("mcp_client", "other"))) as other:
            pairs = []
            for tool, key, foreign in (("ask", "session_id", held["session_id"]),
                                       ("trail", "session_id", held["session_id"]),
                                       ("approve", "request_id", held["awaiting_approval"]),
                                       ("deny", "request_id", held["awaiting_approval"])):
                extra = {"text": "hi"} if tool == "ask" else {}
                pairs.append((
                    refusal(await other.call_tool(tool, {key: foreign, **extra})),
                    refusal(await other.call_tool(tool, {key: "no-such-id", **extra}))))
            theirs = structured(await other.call_tool("approvals_list", {}))
        return pairs, mine, theirs
    pairs, mine, theirs = run(main())
    assert pairs == [("no such session",) * 2, ("no such session",) * 2,
                     ("no such approval request",) * 2, ("no such approval request",) * 2]
    assert len(mine["approvals"]) == 1 and theirs["approvals"] == []
    assert len(rt.model.requests) == 1  # type: ignore[attr-defined]
    assert run(rt.approvals.get(mine["approvals"][0]["request_id"])).status == "pending"


def test_approving_an_unknown_or_decided_request_is_a_readable_error_not_a_crash(
        ledger: Ledger, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rt = make_runtime(ledger, tmp_path, [USAGE_CALL, "You used 0 tokens."])

    async def main() -> list[str]:
        async with Client(create_server(rt, actor=Actor("mcp_client", "approver"))) as c:
            held = structured(await c.call_tool("ask", {"text": "usage?"}))
            unknown = refusal(await c.call_tool("approve", {"request_id": "nope"}))
            denied = refusal(await c.call_tool("deny", {"request_id": "nope"}))
            structured(await c.call_tool("approve", {"request_id": held["awaiting_approval"]}))
            twice = refusal(await c.call_tool("deny", {"request_id": held["awaiting_approval"]}))
            return [unknown, denied, twice]
    with caplog.at_level("INFO"):
        unknown, denied, twice = run(main())
    assert unknown == denied == "no such approval request"
    assert "already" in twice and "Error executing tool" not in twice
    assert not [r for r in caplog.records if r.levelname == "ERROR" or r.exc_info]


def test_over_http_another_tokens_client_gets_one_answer_for_foreign_and_missing_sessions(
        served: tuple[str, Runtime, Path]) -> None:
    base, _rt, _db = served

    async def main() -> tuple[dict[str, Any], list[tuple[str, str]], dict[str, Any]]:
        async with mcp_client(base, CLIENT) as client:
            asked = structured(await client.call_tool("ask", {"text": "status?"}))
        async with mcp_client(base, OTHER) as other:
            pairs = []
            for tool, extra in (("ask", {"text": "and now?"}), ("trail", {})):
                pairs.append((
                    refusal(await other.call_tool(tool, {"session_id": asked["session_id"],
                                                         **extra})),
                    refusal(await other.call_tool(tool, {"session_id": "no-such-session",
                                                         **extra}))))
        async with mcp_client(base, CLIENT) as client:
            trail = structured(await client.call_tool("trail",
                                                      {"session_id": asked["session_id"]}))
        return asked, pairs, trail
    asked, pairs, trail = run(main())
    assert asked["text"] == "All is well."
    assert pairs == [("no such session", "no such session")] * 2
    assert [t["turn_id"] for t in trail["turns"]] == [asked["turn_id"]]


def test_an_empty_ask_is_refused_before_any_model_call_as_over_http(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[str]:
        server = create_server(make_runtime(ledger, tmp_path, ["never asked"]))
        async with Client(server) as client:
            return [refusal(await client.call_tool("ask", {"text": text}))
                    for text in ("", "  \n ")]
    assert run(main()) == ["text must not be empty"] * 2


def test_an_ask_whose_text_is_not_valid_unicode_is_refused_as_an_error_result(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> str:
        server = create_server(make_runtime(ledger, tmp_path, ["never asked"]))
        async with Client(server) as client:
            return refusal(await client.call_tool("ask", {"text": "caf\udce9"}))
    assert "not valid UTF-8 at character 3 (the byte 0xe9)" in run(main())
    assert run(ledger.count("turn.started")) == 0
    assert run(ledger.count("turn.started")) == 0


def test_an_mcp_session_answers_only_the_actor_that_opened_it(
        served: tuple[str, Runtime, Path]) -> None:
    # found driving a live server: another token's client could call tools in, listen
    # on and DELETE a session whose Mcp-Session-Id it had seen
    base, _rt, _db = served
    accept = {"Accept": "application/json, text/event-stream"}

    def headers(token: str, session: str | None = None) -> dict[str, str]:
        extra = {} if session is None else {"mcp-session-id": session,
                                             "mcp-protocol-version": "2025-06-18"}
        return {**accept, **auth(token), **extra}

    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with httpx.Client(base_url=base, timeout=30) as http:
        opened = http.post("/mcp", headers=headers(CLIENT), json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
        session = opened.headers["mcp-session-id"]
        http.post("/mcp", headers=headers(CLIENT, session),
                  json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        tried = [http.post("/mcp", headers=headers(OTHER, session), json=listing),
                 http.post("/mcp", headers=headers(OTHER, session), json={
                     "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "ask", "arguments": {"text": "as whom?"}}})]
        with http.stream("GET", "/mcp", headers={**headers(OTHER, session),
                                                 "Accept": "text/event-stream"}) as stream:
            listened = stream.status_code  # a foreign session's stream: never opened
        tried.append(http.delete("/mcp", headers=headers(OTHER, session)))
        unknown = http.post("/mcp", headers=headers(OTHER, "0" * 32), json=listing)
        still = http.post("/mcp", headers=headers(CLIENT, session), json=listing)
    assert opened.status_code == 200
    assert [r.status_code for r in tried] == [404] * 3 and listened == 404
    assert {r.text for r in tried} == {unknown.text}  # the same as a missing one
    assert still.status_code == 200 and '"name":"ask"' in still.text


def test_ask_refuses_a_wait_outside_0_to_300_seconds_as_http_does(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[list[bool], dict[str, Any]]:
        server = create_server(make_runtime(ledger, tmp_path, ["Fine."]))
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            refused = [(await client.call_tool("ask", {"text": "x", "wait_s": w})).is_error
                       for w in (-5, 301)]
            return refused, tools["ask"].input_schema["properties"]["wait_s"]
    refused, schema = run(main())
    assert refused == [True, True] and (schema["minimum"], schema["maximum"]) == (0, 300)
    assert run(ledger.count("turn.started")) == 0
