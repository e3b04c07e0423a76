"""A server that went away between two calls is met by a new session, and the call is
sent again only when it cannot have reached the old one: real servers, built with
the official SDK, killed and started again (stdio, and streamable HTTP on one port)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.tools.mcp_toolset import McpServerSpec
from tests.channels.helpers import free_port
from tests.conftest import cli_message, run

TOOLS = '''
import os, pathlib, sys
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")

@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())

@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def note_then_die(text: str) -> str:
    """Write a note, then exit before answering."""
    with pathlib.Path(sys.argv[1]).open("a") as f:
        f.write(text + "\\n")
    os._exit(3)
'''

STDIO = TOOLS + "\nserver.run()\n"

# A server of the handshake era (protocol 2025-06-18 and before): it refuses the
# 2026 probe as a 2025 server does, so the client opens a session with `initialize`
# and the server issues an Mcp-Session-Id, which a restarted server does not know.
HTTP = TOOLS + '''
import json
import uvicorn
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

app = server.streamable_http_app(host="127.0.0.1")

async def handshake_era(scope, receive, send):
    headers = dict(scope.get("headers") or ()) if scope["type"] == "http" else {}
    version = headers.get(b"mcp-protocol-version", b"").decode()
    if version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        body = json.dumps({"jsonrpc": "2.0", "id": "server-error", "error": {
            "code": -32600, "message": "Bad Request: Unsupported protocol version"}})
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body.encode()})
        return
    await app(scope, receive, send)

uvicorn.run(handshake_era, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
'''


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def last_result(rt: Runtime) -> Any:
    """The tool message the model was last sent (the turn's own, after the history)."""
    return [m for m in rt.model.requests[-1].messages  # type: ignore[attr-defined]
            if m.role == "tool"][-1]


async def reopened(ledger: Ledger) -> list[tuple[str, str, str]]:
    return [(e.data["plugin"], e.data["hook"], e.data["consequence"])
            for e in await ledger.entries(kinds=["hook.error"])]


def stdio_runtime(ledger: Ledger, tmp_path: Path, replies: list[Any]) -> Runtime:
    script = tmp_path / "notes_server.py"
    script.write_text(STDIO)
    spec = McpServerSpec("notes", (sys.executable, str(script), str(tmp_path / "notes.log")))
    return Runtime(model=ScriptedModel(replies), ledger=ledger, tools=[], gate=Gate(),
                   mcp_servers=[spec])


@pytest.mark.slow
def test_the_first_call_after_a_stdio_server_was_killed_starts_it_again_and_succeeds(
        ledger: Ledger, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rt = stdio_runtime(ledger, tmp_path, [call("notes__pid"), "Running.",
                                          call("notes__pid"), "Running again."])

    async def main() -> tuple[str, Any]:
        await rt.respond(cli_message())
        first = last_result(rt)
        connection = rt.mcp.connections["notes"]
        os.kill(int(first.content), signal.SIGKILL)  # an OOM kill, a crash: between calls
        await asyncio.wait_for(connection.ended.wait(), 10)
        answer = await rt.respond(cli_message())
        after = last_result(rt)
        await rt.mcp.close()
        return first.content, (answer, after)

    with caplog.at_level(logging.WARNING, logger="overt.tools.mcp"):
        before, (answer, after) = run(main())
    assert answer.text == "Running again." and not after.is_error
    assert after.content.isdigit() and after.content != before  # a new server process
    connection = rt.mcp.connections["notes"]
    assert (connection.opened, connection.resent) == (2, 1)
    assert run(reopened(ledger)) == [("mcp:notes", "session", "reopened")]
    assert "the call to pid never reached it" in caplog.text


@pytest.mark.slow
def test_a_call_that_reached_a_stdio_server_before_it_died_is_an_error_and_not_run_again(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = stdio_runtime(ledger, tmp_path, [call("notes__note_then_die", text="pay 10 EUR"),
                                          "It may not have been written.",
                                          call("notes__pid"), "Back."])

    async def main() -> tuple[Any, Any]:
        await rt.respond(cli_message())
        died = last_result(rt)
        await rt.respond(cli_message())
        after = last_result(rt)
        await rt.mcp.close()
        return died, after

    died, after = run(main())
    assert died.is_error and "Connection closed" in died.content
    assert (tmp_path / "notes.log").read_text() == "pay 10 EUR\n"  # run once, not twice
    assert not after.is_error and after.content.isdigit()  # the next call has a new server
    connection = rt.mcp.connections["notes"]
    assert (connection.opened, connection.resent) == (2, 0)


@contextmanager
def http_server(script: Path, port: int, log: Path) -> Iterator[int]:
    """The server listening on ``port``, until the block ends; its process id."""
    process = subprocess.Popen([sys.executable, str(script), str(log), str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, f"the server exited {process.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.02)  # polling a port with a deadline: nothing to wait on
        yield process.pid
    finally:
        process.kill()
        process.wait(10)


@pytest.mark.slow
def test_a_redeployed_http_server_is_met_by_a_new_session_and_the_call_succeeds(
        ledger: Ledger, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    script, port, log = tmp_path / "remote.py", free_port(), tmp_path / "remote.log"
    script.write_text(HTTP)
    spec = McpServerSpec("remote", url=f"http://127.0.0.1:{port}/mcp")
    rt = Runtime(model=ScriptedModel([call("remote__pid"), "Up.", call("remote__pid"),
                                      "Up again."]),
                 ledger=ledger, tools=[], gate=Gate(), mcp_servers=[spec])
    loop = asyncio.new_event_loop()
    try:
        with http_server(script, port, log) as first_pid:
            loop.run_until_complete(rt.respond(cli_message()))
            first = last_result(rt)
        with http_server(script, port, log) as second_pid, \
                caplog.at_level(logging.WARNING, logger="overt.tools.mcp"):
            answer = loop.run_until_complete(rt.respond(cli_message()))
            after = last_result(rt)
            loop.run_until_complete(rt.mcp.close())
    finally:
        loop.close()
    assert first.content == str(first_pid)
    assert answer.text == "Up again." and not after.is_error
    assert after.content == str(second_pid)
    connection = rt.mcp.connections["remote"]
    assert (connection.opened, connection.resent) == (2, 1)
    assert run(reopened(ledger)) == [("mcp:remote", "session", "reopened")]
    assert "it answered 404 to the session id" in caplog.text
