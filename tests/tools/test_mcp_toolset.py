"""Tools of another MCP server join the registry and pass the same gate, recorded the
same way: a real server over stdio, started by the official SDK."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer

from overt.errors import ConfigError
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.tools.mcp_toolset import McpServerSpec, specs_from_config
from tests.channels.helpers import uvicorn_server
from tests.conftest import cli_message, run

SERVER = '''
import os, pathlib, sys
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("notes")
log = pathlib.Path(sys.argv[1])

@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)

@server.tool()
def write_note(text: str) -> str:
    """Write a note."""
    with log.open("a") as f:
        f.write(text + "\\n")
    return "written"

@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def broken() -> str:
    """Always fails."""
    raise ToolError("the disk is on fire")

@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())

@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def crash() -> str:
    """The server exits at once."""
    os._exit(3)

server.run()
'''


def spec(tmp_path: Path) -> McpServerSpec:
    script = tmp_path / "notes_server.py"
    script.write_text(SERVER)
    return McpServerSpec("notes", (sys.executable, str(script), str(tmp_path / "notes.log")))


def runtime(ledger: Ledger, tmp_path: Path, replies: list[Any]) -> Runtime:
    return Runtime(model=ScriptedModel(replies), ledger=ledger, tools=[], gate=Gate(),
                   mcp_servers=[spec(tmp_path)])


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@pytest.mark.slow
def test_a_servers_read_only_tool_runs_through_the_gate_and_is_recorded(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = runtime(ledger, tmp_path, [call("notes__add", a=2, b=3), "It is 5."])
    result = run(rt.respond(cli_message()))
    assert result.text == "It is 5." and result.tools_used == ["notes__add"]
    assert rt.model.requests[1].messages[-1].content == "5"  # type: ignore[attr-defined]
    assert {"notes__add", "notes__write_note", "notes__broken"} <= set(rt.tools.names)
    assert "notes__add" in rt.engine.system_prompt
    decision = run(ledger.entries(kinds=["policy.decision"]))[0].data
    assert (decision["effect"], decision["reason_code"], decision["capability"]) == (
        "allow", "read_only", "tool.notes__add")
    completed = run(ledger.entries(kinds=["tool_call.completed"]))[0].data
    assert completed["tool_status"] == "ok" and completed["tool_name"] == "notes__add"


@pytest.mark.slow
def test_a_servers_mutating_tool_waits_for_approval_and_then_runs_once(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = runtime(ledger, tmp_path, [call("notes__write_note", text="hello"), "Noted."])
    paused = run(rt.respond(cli_message()))
    assert paused.awaiting_approval and not (tmp_path / "notes.log").exists()
    resumed = run(rt.approve(paused.awaiting_approval))
    assert resumed.result is not None and resumed.result.text == "Noted."
    assert (tmp_path / "notes.log").read_text() == "hello\n"


@pytest.mark.slow
def test_a_servers_error_and_bad_arguments_reach_the_model_as_errors(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = runtime(ledger, tmp_path, [
        {"tool_calls": [{"name": "notes__broken", "arguments": {}},
                        {"name": "notes__add", "arguments": {"a": 1, "c": 2}}]}, "Sorry."])
    run(rt.respond(cli_message()))
    broken, bad = rt.model.requests[1].messages[-2:]  # type: ignore[attr-defined]
    assert broken.is_error and "the disk is on fire" in broken.content
    assert bad.is_error and "TypeError" in bad.content


def test_a_server_that_cannot_start_is_recorded_and_the_runtime_goes_on(
        ledger: Ledger, tmp_path: Path) -> None:
    missing = McpServerSpec("gone", (str(tmp_path / "no-such-server"),), timeout_s=5)
    rt = Runtime(model=ScriptedModel(["fine"]), ledger=ledger, tools=[], gate=Gate(),
                 mcp_servers=[missing])
    assert run(rt.respond(cli_message())).text == "fine"
    [error] = [e.data for e in run(ledger.entries(kinds=["hook.error"]))]
    assert (error["plugin"], error["consequence"]) == ("mcp:gone", "no_tools")


def results(rt: Runtime) -> list[str]:
    """What each tool call the model was answered with said, in order."""
    requests = rt.model.requests  # type: ignore[attr-defined]
    return [m.content for m in requests[-1].messages if m.role == "tool"]


@pytest.mark.slow
def test_calls_reach_one_server_process_for_the_runtimes_lifetime_and_close_ends_it(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = runtime(ledger, tmp_path, [call("notes__pid"), call("notes__pid"), "Same.",
                                    call("notes__pid"), "Still."])

    async def main() -> list[str]:
        await rt.respond(cli_message())
        first = results(rt)
        await rt.respond(cli_message())
        pids = first + results(rt)[-1:]
        await rt.mcp.close()
        return pids

    pids = run(main())
    assert len(pids) == 3 and len(set(pids)) == 1  # one process, three calls
    assert rt.mcp.connections["notes"].opened == 1  # listing the tools used it too
    with pytest.raises(ProcessLookupError):
        os.kill(int(pids[0]), 0)  # closed with the runtime: the server is gone


@pytest.mark.slow
def test_a_server_that_crashed_is_started_again_on_the_next_call_and_that_is_recorded(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = runtime(ledger, tmp_path, [call("notes__pid"), call("notes__crash"),
                                    call("notes__pid"), "Recovered."])

    async def main() -> list[Any]:
        await rt.respond(cli_message())
        said = rt.model.requests[-1].messages  # type: ignore[attr-defined]
        await rt.mcp.close()
        return [m for m in said if m.role == "tool"]

    before, crashed, after = run(main())
    assert crashed.is_error and not after.is_error and before.content != after.content
    assert rt.mcp.connections["notes"].opened == 2
    [reopened] = [e.data for e in run(ledger.entries(kinds=["hook.error"]))]
    assert (reopened["plugin"], reopened["hook"], reopened["consequence"]) == (
        "mcp:notes", "session", "reopened")


WHOAMI = MCPServer("remote")


@WHOAMI.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header the request came with."""
    request = ctx.request_context.request
    return str(request.headers.get("authorization") if request is not None else None)


def test_an_http_server_gets_the_bearer_token_the_environment_holds(
        ledger: Ledger, tmp_path: Path) -> None:
    with uvicorn_server(WHOAMI.streamable_http_app(host="127.0.0.1")) as base:
        [remote] = specs_from_config(
            {"remote": {"url": f"{base}/mcp", "bearer_token_env": "REMOTE_TOKEN",
                        "headers": {"X-Team": "ops"}, "read_only": ["whoami"]}},
            {"REMOTE_TOKEN": "s3cret"})
        rt = Runtime(model=ScriptedModel([call("remote__whoami"), "Done."]), ledger=ledger,
                     tools=[], gate=Gate(), mcp_servers=[remote])

        async def main() -> list[str]:
            await rt.respond(cli_message())
            await rt.mcp.close()
            return results(rt)
        said = run(main())
    assert said == ["Bearer s3cret"]
    assert "s3cret" not in repr(remote)
    with pytest.raises(ConfigError, match="REMOTE_TOKEN, which is not set"):
        specs_from_config({"remote": {"url": f"{base}/mcp",
                                      "bearer_token_env": "REMOTE_TOKEN"}}, {})
