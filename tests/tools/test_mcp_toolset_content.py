"""What a server's tool result holds besides text reaches the model named, not dropped:
a real server over stdio, started by the official SDK."""

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
