"""Tools of another MCP server join the registry and pass the same gate, recorded the
same way: a real server over stdio, started by the official SDK."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.tools.mcp_toolset import McpServerSpec
from tests.conftest import cli_message, run

SERVER = '''
import pathlib, sys
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


def test_a_servers_mutating_tool_waits_for_approval_and_then_runs_once(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = runtime(ledger, tmp_path, [call("notes__write_note", text="hello"), "Noted."])
    paused = run(rt.respond(cli_message()))
    assert paused.awaiting_approval and not (tmp_path / "notes.log").exists()
    resumed = run(rt.approve(paused.awaiting_approval))
    assert resumed.result is not None and resumed.result.text == "Noted."
    assert (tmp_path / "notes.log").read_text() == "hello\n"


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
