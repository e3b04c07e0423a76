"""The MCP server (the ``mcp`` extra: the official SDK), over stdio or streamable HTTP.

Tools: ``ask`` (a turn of the agent), ``trail``, ``approvals_list``, ``approve``,
``deny`` and the memory tools. Each call acts as the MCP client's actor: over
stdio the one the server was started with (``overt mcp --actor mcp_client:NAME``),
over HTTP the bearer token's. Its capabilities decide what it may do.

Every call is on the record with source ``mcp`` and caller_session_id
``mcp:{caller_actor_kind}:{tool_name}``, where ``caller_actor_kind`` is the
client's kind (``claude-code`` for ``mcp_client:claude-code``; the actor kind,
``operator``, for anyone else): ``ask`` as its turn, a memory tool as its gated
tool call, the others as a ``capability.checked`` entry (granted or refused).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

from overt.channels.http import request_json, trail_json
from overt.channels.turns import wait_for_answer
from overt.errors import ApprovalError, ExtraMissingError, OvertError
from overt.events import CapabilityChecked
from overt.memory.tools import memory_tools
from overt.policy.actors import Actor
from overt.reasoning.trail import build_trail
from overt.runtime import Runtime
from overt.types import IncomingMessage

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ExtraMissingError("mcp", "mcp") from exc

MCP_TOOLS = ("ask", "trail", "approvals_list", "approve", "deny")


class McpToolError(OvertError, ToolError):
    """An MCP tool call was refused or failed; the client reads the message (the
    SDK shows a ``ToolError``'s message and hides any other exception's)."""


def caller_kind(actor: Actor) -> str:
    """The ``caller_actor_kind`` of ``actor`` in caller_session_id."""
    return actor.name if actor.kind == "mcp_client" else actor.kind


def _actor(ctx: Context, default: Actor) -> Actor:
    """The caller: the bearer token's actor over HTTP, else the server's."""
    request = ctx.request_context.request if ctx is not None else None
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        found = scope.get("state", {}).get("overt_actor")
        if isinstance(found, Actor):
            return found
    return default


def create_server(runtime: Runtime, *, actor: Actor | None = None,
                  name: str = "overt") -> MCPServer:
    """An MCP server over ``runtime``. ``actor``: who calls when the transport
    does not say (stdio); default ``mcp_client:default``."""
    default = actor or Actor("mcp_client", "default")
    server: MCPServer = MCPServer(name, instructions=(
        "overt: an agent that keeps its work on the record. `ask` asks it; `trail` "
        "shows why it did what it did; approvals are decided with `approve`/`deny`."))

    async def audit(ctx: Context, tool: str, capability: str) -> Actor:
        who = _actor(ctx, default)
        check = runtime.gate.capabilities.check(who, capability)
        if capability != "approvals.decide":  # the approval book records its own check
            await runtime.ledger.record([CapabilityChecked(
                actor=str(who), capability=capability, granted=check.granted,
                reason_code=check.reason_code, subject=f"mcp:{caller_kind(who)}:{tool}")])
            if not check.granted:
                raise McpToolError(f"{who} may not {tool}: {check.message}")
        return who

    @server.tool()
    async def ask(text: str, ctx: Context, session_id: str | None = None,
                  wait_s: float = 0.0) -> dict[str, Any]:
        """Ask the agent. The answer is its ResponseResult; a turn held for approval
        answers with `awaiting_approval` (the request id), or, within `wait_s`
        seconds, with the answer once someone decides it."""
        who = _actor(ctx, default)
        check = runtime.gate.capabilities.check(who, "agent.ask")
        if not check.granted:
            await runtime.ledger.record([CapabilityChecked(
                actor=str(who), capability="agent.ask", granted=False,
                reason_code=check.reason_code, subject=f"mcp:{caller_kind(who)}:ask")])
            raise McpToolError(f"{who} may not ask: {check.message}")
        message = IncomingMessage("mcp", text, {
            "caller_actor_kind": caller_kind(who), "tool_name": "ask", "actor": str(who)})
        result = await runtime.respond(message, session_id=session_id, channel_ids={
            "mcp_tool": "ask", "mcp_actor": str(who)})
        reply = result.to_dict()
        if result.awaiting_approval is not None and wait_s > 0:
            state = await wait_for_answer(runtime.ledger, result.turn_id,
                                          timeout_s=min(wait_s, 300.0))
            if state is not None and state["completed_at"] is not None:
                reply.update(text=state["text"] or "", tools_used=state["tools_used"],
                             error=state["error"], awaiting_approval=None)
        return reply

    @server.tool()
    async def trail(session_id: str, ctx: Context) -> dict[str, Any]:
        """The session's reasoning trail: its turns with steps, tool calls,
        policy decisions and approvals."""
        await audit(ctx, "trail", "trail.read")
        return trail_json(await build_trail(runtime.ledger, session_id=session_id))

    @server.tool()
    async def approvals_list(ctx: Context, status: str = "pending") -> dict[str, Any]:
        """Approval requests of a status (pending, approved, denied, expired; comma-separated)."""
        await audit(ctx, "approvals_list", "approvals.read")
        requests = await runtime.approvals.list(status.split(","))  # type: ignore[arg-type]
        return {"approvals": [request_json(r) for r in requests]}

    async def decide(ctx: Context, tool: str, request_id: str,
                     reason: str | None) -> dict[str, Any]:
        who = await audit(ctx, tool, "approvals.decide")
        verb = runtime.approve if tool == "approve" else runtime.deny
        try:
            resumed = await verb(request_id, by=who, reason=reason)
        except ApprovalError as exc:
            raise McpToolError(str(exc)) from exc
        return {"request": request_json(resumed.request),
                "result": resumed.result.to_dict() if resumed.result is not None else None}

    @server.tool()
    async def approve(request_id: str, ctx: Context, reason: str | None = None) -> dict[str, Any]:
        """Approve a held call: it runs once and the paused turn answers."""
        return await decide(ctx, "approve", request_id, reason)

    @server.tool()
    async def deny(request_id: str, ctx: Context, reason: str | None = None) -> dict[str, Any]:
        """Deny a held call: the paused turn answers without it."""
        return await decide(ctx, "deny", request_id, reason)

    names = {t.name for t in memory_tools()}
    for spec in runtime.tools.specs():
        if spec.name in names:
            _add_memory_tool(server, runtime, default, spec.name, spec.description,
                             dict(spec.input_schema))
    return server


def _add_memory_tool(server: MCPServer, runtime: Runtime, default: Actor, name: str,
                     description: str, schema: dict[str, Any]) -> None:
    """Offer the model-facing memory tool ``name`` over MCP, run through the gate."""
    required = set(schema.get("required", ()))
    params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for prop in schema.get("properties", {}):
        params.append(inspect.Parameter(
            prop, inspect.Parameter.KEYWORD_ONLY, annotation=Any,
            default=inspect.Parameter.empty if prop in required else None))

    async def call(**kwargs: Any) -> str:
        ctx = kwargs.pop("ctx")
        who = _actor(ctx, default)
        arguments = {k: v for k, v in kwargs.items() if v is not None or k in required}
        done = await runtime.call_tool(name, arguments, actor=who, source="mcp",
                                       caller_session_id=f"mcp:{caller_kind(who)}:{name}")
        if done.status == "held":
            return json.dumps({"status": "held", "request_id": done.request_id})
        if done.is_error:
            raise McpToolError(done.content)
        return done.content

    fn: Callable[..., Awaitable[str]] = call
    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
    fn.__name__ = name
    server.add_tool(fn, name=name, description=description, structured_output=False)
    registered = server._tool_manager.get_tool(name)  # the SDK has no public setter
    if registered is not None:
        registered.parameters = schema
