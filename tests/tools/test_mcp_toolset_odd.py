"""What a server offers that overt could misread: results that are not text (named to
the model, not dropped), tool names that clash (none registered, recorded). Real
servers over stdio, started by the official SDK."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.tools.mcp_toolset import McpServerSpec
from tests.conftest import cli_message, run

SERVER = '''
from mcp.server.mcpserver import MCPServer
from mcp.types import (EmbeddedResource, ImageContent, ResourceLink, TextContent,
                       TextResourceContents, ToolAnnotations)

server = MCPServer("files")
RO = ToolAnnotations(readOnlyHint=True)

@server.tool(annotations=RO)
def read_file() -> list:
    """A file, as an embedded resource."""
    return [EmbeddedResource(type="resource", resource=TextResourceContents(
        uri="file:///notes.txt", mime_type="text/plain", text="buy milk"))]

@server.tool(annotations=RO)
def screenshot() -> list:
    """An image only."""
    return [ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")]

@server.tool(annotations=RO)
def find() -> list:
    """Text and a link."""
    return [TextContent(type="text", text="one match"),
            ResourceLink(type="resource_link", name="report", uri="file:///report.pdf")]

server.run()
'''


def call(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": {}}]}


@pytest.mark.slow
def test_resources_images_and_links_in_a_result_reach_the_model_not_dropped(
        ledger: Ledger, tmp_path: Path) -> None:
    script = tmp_path / "files_server.py"
    script.write_text(SERVER)
    spec = McpServerSpec("files", (sys.executable, str(script)))
    rt = Runtime(model=ScriptedModel([call("files__read_file"), call("files__screenshot"),
                                      call("files__find"), "Done."]),
                 ledger=ledger, tools=[], gate=Gate(), mcp_servers=[spec])
    try:
        assert run(rt.respond(cli_message())).text == "Done."
        requests = rt.model.requests  # type: ignore[attr-defined]
        resource, image, found = (r.messages[-1] for r in requests[1:4])
    finally:
        run(rt.close())
    assert not resource.is_error and "buy milk" in resource.content  # was "" (dropped)
    assert "file:///notes.txt" in resource.content
    assert "image (image/png), not shown" in image.content  # was "": nothing said
    assert "one match" in found.content and "file:///report.pdf" in found.content


CLASHING = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("dup")

@server.tool(name="look.up")
def look_dot_up() -> str:
    return "dot"

@server.tool(name="look_up")
def look_up() -> str:
    return "underscore"

@server.tool(name="other")
def other() -> str:
    return "other"

server.run()
'''


def clashing(tmp_path: Path) -> McpServerSpec:
    script = tmp_path / "dup_server.py"
    script.write_text(CLASHING)
    return McpServerSpec("dup", (sys.executable, str(script)))


@pytest.mark.slow
def test_two_server_tools_that_become_one_name_register_none_and_say_so(
        ledger: Ledger, tmp_path: Path) -> None:
    # look.up and look_up are both dup__look_up: which one a call reached was a guess
    rt = Runtime(model=ScriptedModel(["fine"]), ledger=ledger, tools=[], gate=Gate(),
                 mcp_servers=[clashing(tmp_path)])
    try:
        assert run(rt.respond(cli_message())).text == "fine"
        assert not [n for n in rt.tools.names if n.startswith("dup__")]
        [error] = [e.data for e in run(ledger.entries(kinds=["hook.error"]))]
    finally:
        run(rt.close())
    assert (error["plugin"], error["consequence"]) == ("mcp:dup", "no_tools")


@pytest.mark.slow
def test_a_server_tool_clashing_with_a_registered_one_leaves_none_of_its_tools_registered(
        ledger: Ledger, tmp_path: Path) -> None:
    @tool(name="dup__other")
    def local_other() -> str:
        """Already here."""
        return "local"

    script = tmp_path / "one_server.py"
    script.write_text(CLASHING.replace('name="look.up"', 'name="look_up_2"'))
    spec = McpServerSpec("dup", (sys.executable, str(script)))
    rt = Runtime(model=ScriptedModel(["fine"]), ledger=ledger, tools=[local_other],
                 gate=Gate(), mcp_servers=[spec])
    try:
        run(rt.respond(cli_message()))
        names = set(rt.tools.names)
        [error] = [e.data for e in run(ledger.entries(kinds=["hook.error"]))]
    finally:
        run(rt.close())
    assert error["consequence"] == "no_tools"  # recorded as none of its tools ...
    assert names & {"dup__look_up", "dup__look_up_2"} == set()  # ... and none is there


LOW_LEVEL = '''
import json, anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
import mcp.types as t

async def list_tools(ctx, params):
    return t.ListToolsResult(tools=[t.Tool(name="fetch", input_schema={
        "type": "object", "required": ["file-path"],
        "properties": {"file-path": {"type": "string", "description": "which file"},
                       "_limit": {"type": "integer"}}},
        annotations=t.ToolAnnotations(read_only_hint=True))])

async def call_tool(ctx, params):
    text = json.dumps(params.arguments, sort_keys=True)
    return t.CallToolResult(content=[t.TextContent(type="text", text=text)])

server = Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)

async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())
anyio.run(main)
'''


@pytest.mark.slow
def test_arguments_whose_names_are_not_python_names_reach_the_server(
        ledger: Ledger, tmp_path: Path) -> None:
    # "_limit" cost the server all its tools; "file-path" was refused as unexpected
    script = tmp_path / "odd_server.py"
    script.write_text(LOW_LEVEL)
    arguments = {"file-path": "a.txt", "_limit": 2}
    rt = Runtime(model=ScriptedModel([
        {"tool_calls": [{"name": "odd__fetch", "arguments": arguments}]}, "Done."]),
        ledger=ledger, tools=[], gate=Gate(),
        mcp_servers=[McpServerSpec("odd", (sys.executable, str(script)))])
    try:
        assert run(rt.respond(cli_message())).text == "Done."
        answer = rt.model.requests[1].messages[-1]  # type: ignore[attr-defined]
    finally:
        run(rt.close())
    assert not answer.is_error and json.loads(answer.content) == arguments
