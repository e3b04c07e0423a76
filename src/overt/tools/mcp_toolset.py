"""Tools of other MCP servers, offered to the model as overt tools (``mcp`` extra).

Each configured server (``[mcp_servers.NAME]``: a ``command`` run over stdio, or a
streamable HTTP ``url``) is asked for its tools when the runtime starts; each
becomes ``NAME__TOOL`` in the registry, so it goes through the same gate and is
recorded like any tool: capability ``tool.NAME__TOOL``, read-only only when the
server marks it ``readOnlyHint`` or the config lists it in ``read_only`` (else the
policy treats it as mutating and, by default, asks). Arguments are checked
against the server's schema for names and required fields; the server checks
the rest and its error reaches the model as an ``is_error`` result.

A call opens its own session (a stdio server is started for it): simple, and a
server that crashed between calls costs nothing more than the call that failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, create_model

from overt.errors import ConfigError, ExtraMissingError, ToolError
from overt.tools.base import Tool, _Arguments

_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


class McpToolError(ToolError):
    """An MCP server answered a call with an error."""


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """One server to take tools from: ``command`` (argv, stdio) or ``url`` (HTTP)."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    read_only: tuple[str, ...] = ()
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.name or _UNSAFE.search(self.name):
            raise ConfigError(f"mcp_servers: {self.name!r} must be letters, digits, _ or -")
        if bool(self.command) == bool(self.url):
            raise ConfigError(f"mcp_servers.{self.name}: give exactly one of command or url")


def _target(spec: McpServerSpec) -> Any:
    try:
        from mcp.client.stdio import StdioServerParameters
    except ImportError as exc:
        raise ExtraMissingError("mcp", "mcp") from exc
    if spec.url is not None:
        return spec.url
    return StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]),
                                 env=dict(spec.env) or None)


def _client(spec: McpServerSpec) -> Any:
    from mcp import Client
    return Client(_target(spec), read_timeout_seconds=spec.timeout_s)


async def load_toolset(spec: McpServerSpec) -> list[Tool]:
    """The server's tools as overt tools.

    Raises:
        ExtraMissingError: the ``mcp`` extra is not installed.
        Exception: the server could not be started or reached (the caller records it).
    """
    async with _client(spec) as client:
        listed = (await client.list_tools()).tools
    return [_tool(spec, t) for t in listed]


def _tool(spec: McpServerSpec, remote: Any) -> Tool:
    name = _UNSAFE.sub("_", f"{spec.name}__{remote.name}")[:64]
    schema: dict[str, Any] = dict(remote.input_schema or {"type": "object", "properties": {}})
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    fields: dict[str, Any] = {
        key: (Any, Field(... if key in required else None,
                         description=(value or {}).get("description")))
        for key, value in properties.items() if key.isidentifier()}
    model = create_model(f"{name}_arguments", __base__=_Arguments, **fields)
    hints = remote.annotations
    read_only = remote.name in spec.read_only or bool(hints and hints.read_only_hint)
    remote_name = remote.name

    async def call(**arguments: Any) -> Any:
        sent = {k: v for k, v in arguments.items() if v is not None or k in required}
        async with _client(spec) as client:
            result = await client.call_tool(remote_name, sent)
        text = "\n".join(getattr(c, "text", "") for c in result.content
                         if getattr(c, "type", "") == "text")
        if result.is_error:
            raise McpToolError(text or f"{remote_name} failed")
        if text or result.structured_content is None:
            return text  # what the server said for a model to read
        return result.structured_content

    return Tool(name=name, description=remote.description or f"{remote.name} ({spec.name})",
                function=call, arguments_model=model, input_schema=schema,
                read_only=read_only, capability=None, timeout_s=spec.timeout_s,
                context_param=None, is_async=True, inline=False)


def specs_from_config(servers: Mapping[str, Mapping[str, Any]]) -> list[McpServerSpec]:
    """``[mcp_servers.NAME]`` tables as specs.

    Raises:
        ConfigError: a table gives neither or both of command and url.
    """
    out = []
    for name, table in servers.items():
        command: Sequence[str] = table.get("command") or ()
        out.append(McpServerSpec(name, tuple(command), table.get("url"),
                                 dict(table.get("env") or {}),
                                 tuple(table.get("read_only") or ()),
                                 float(table.get("timeout_s", 30.0))))
    return out

