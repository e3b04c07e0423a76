"""The MCP server (the ``mcp`` extra: the official SDK), over stdio or streamable HTTP.

Tools: ``ask`` (a turn of the agent), ``trail``, ``approvals_list``, ``approve``,
``deny`` and the memory tools. Each call acts as the MCP client's actor: over
stdio the one the server was started with (``overt mcp --actor mcp_client:NAME``),
over HTTP the bearer token's. Its capabilities decide what it may do.

``ask`` without a ``session_id`` starts a new session (its id comes back in the
answer); with one it continues that session, if the caller may (its own, or
any with ``sessions.read_any``). ``trail`` and the approval tools reach only
sessions the caller may; anything else is answered as missing, and refusals
(like ``approve`` of an unknown id) come back as an error result with a plain
message (:mod:`overt.sessions.access`).

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
from typing import Annotated, Any

from overt.channels.turns import answered, wait_for_answer
from overt.channels.views import MAX_WAIT_S, request_json, trail_json
from overt.errors import ExtraMissingError, NotFoundError, OvertError, UsageError
from overt.events import CapabilityChecked
from overt.ids import new_ulid
from overt.memory.tools import memory_tools
from overt.policy.actors import Actor
from overt.reasoning.trail import build_trail
from overt.runtime import Runtime
from overt.sessions.access import SessionAccess
from overt.types import IncomingMessage

try:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, InputRequiredResult, TextContent
    from mcp.types import Tool as McpTool
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ExtraMissingError("mcp", "mcp") from exc

MCP_TOOLS = ("ask", "trail", "approvals_list", "approve", "deny")

WaitSeconds = Annotated[float, Field(ge=0, le=MAX_WAIT_S)]
"""``ask``'s ``wait_s``: 0 to 300 seconds, as over HTTP (a negative one was taken as 0)."""

Answer = Annotated[CallToolResult, dict[str, Any]]
"""What the channel tools return: a JSON object (their output schema), or an error
result whose message the client reads."""


class McpToolError(OvertError, ToolError):
    """An MCP tool call was refused or failed; the client reads the message (the
    SDK shows a ``ToolError``'s message and hides any other exception's)."""


def authenticated(actor: Actor) -> AuthenticatedUser:
    """``actor`` as the SDK's authenticated user, so that the streamable HTTP session
    manager binds each MCP session to the actor that made it (its ``client_id`` and
    ``subject``; never the token itself)."""
    name = str(actor)
    return AuthenticatedUser(AccessToken(token="", client_id=name, scopes=[], subject=name))


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


def _result(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data))],
                          structured_content=data)


def _refusal(message: str) -> CallToolResult:
    """An error result the client reads as it is (``isError``, the message alone: no
    "Error executing tool" and no traceback in the server's log)."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


async def _answer(work: Awaitable[dict[str, Any]]) -> CallToolResult:
    """``work``'s answer, or the refusal it raised (a missing capability, a session,
    turn or approval the caller may not reach, an approval already decided, a text
    that is not valid Unicode)."""
    try:
        return _result(await work)
    except (McpToolError, NotFoundError, UsageError) as exc:  # ApprovalError is one
        return _refusal(str(exc))


class StrictServer(MCPServer):
    """The SDK's server, its tools taking only the arguments they declare.

    The SDK drops an argument a tool does not declare, so ``ask`` with ``session``
    for ``session_id`` would start a new conversation and leave the caller's behind;
    here it is an error result naming it, for the client (often a model) to correct.
    Each tool's input schema says so (``additionalProperties: false``).
    """

    async def list_tools(self) -> list[McpTool]:
        return [t.model_copy(update={"input_schema": {**t.input_schema,
                                                      "additionalProperties": False}})
                for t in await super().list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None,
                        ) -> CallToolResult | InputRequiredResult:
        declared = next((t.input_schema.get("properties", {})
                         for t in await super().list_tools() if t.name == name), None)
        unknown = [k for k in arguments if declared is not None and k not in declared]
        if unknown:
            raise McpToolError(f"{name} takes no argument {', '.join(map(repr, unknown))} "
                               f"(it takes: {', '.join(declared or ())})")
        return await super().call_tool(name, arguments, context)


def create_server(runtime: Runtime, *, actor: Actor | None = None,
                  name: str = "overt") -> MCPServer:
    """An MCP server over ``runtime``. ``actor``: who calls when the transport
    does not say (stdio); default ``mcp_client:default``."""
    default = actor or Actor("mcp_client", "default")
    server: MCPServer = StrictServer(name, instructions=(
        "overt: an agent that keeps its work on the record. `ask` asks it (pass the "
        "`session_id` of an earlier answer to continue that conversation); `trail` shows "
        "why it did what it did; approvals are decided with `approve`/`deny`."))

    def access() -> SessionAccess:
        return SessionAccess(runtime.ledger, runtime.gate.capabilities)

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

    async def asking(ctx: Context, text: str, session_id: str | None,
                     wait_s: float) -> dict[str, Any]:
        if not text.strip():  # as the HTTP API: no model call for nothing asked
            raise McpToolError("text must not be empty")
        who = _actor(ctx, default)
        check = runtime.gate.capabilities.check(who, "agent.ask")
        if not check.granted:
            await runtime.ledger.record([CapabilityChecked(
                actor=str(who), capability="agent.ask", granted=False,
                reason_code=check.reason_code, subject=f"mcp:{caller_kind(who)}:ask")])
            raise McpToolError(f"{who} may not ask: {check.message}")
        new = session_id is None
        if session_id is None:
            session_id = f"mcp:{new_ulid()}"  # each call its own session
        else:
            await access().session(who, session_id, surface=f"mcp:{caller_kind(who)}:ask")
        message = IncomingMessage("mcp", text, {
            "caller_actor_kind": caller_kind(who), "tool_name": "ask", "actor": str(who)})
        result = await runtime.respond(message, session_id=session_id, actor=who,
                                       history=() if new else None, channel_ids={"mcp_tool": "ask",
                                                    "mcp_actor": str(who)})
        reply = result.to_dict()
        if result.awaiting_approval is not None and wait_s > 0:
            state = await wait_for_answer(runtime.ledger, result.turn_id,
                                          timeout_s=wait_s)
            if state is not None and state.ended:
                reply.update(answered(state))
        return reply

    @server.tool()
    async def ask(text: str, ctx: Context, session_id: str | None = None,
                  wait_s: WaitSeconds = 0.0) -> Answer:
        """Ask the agent. The answer is its ResponseResult. Without `session_id` the
        question starts a new conversation, whose id is the answer's `session_id`;
        pass it back to continue that conversation. A turn held for approval
        answers with `awaiting_approval` (the request id), or, within `wait_s`
        seconds, with the answer once someone decides it."""
        return await _answer(asking(ctx, text, session_id, wait_s))

    async def trailing(ctx: Context, session_id: str) -> dict[str, Any]:
        who = await audit(ctx, "trail", "trail.read")
        await access().session(who, session_id, surface=f"mcp:{caller_kind(who)}:trail")
        return trail_json(await build_trail(runtime.ledger, session_id=session_id))

    @server.tool()
    async def trail(session_id: str, ctx: Context) -> Answer:
        """The session's reasoning trail: its turns with steps, tool calls,
        policy decisions and approvals."""
        return await _answer(trailing(ctx, session_id))

    async def listing(ctx: Context, status: str) -> dict[str, Any]:
        who = await audit(ctx, "approvals_list", "approvals.read")
        statuses = status.split(",")
        known = ("pending", "approved", "denied", "expired")
        if not set(statuses) <= set(known):
            raise McpToolError(f"status is one or more of {', '.join(known)}")
        requests = await runtime.approvals.list(statuses)  # type: ignore[arg-type]
        return {"approvals": [request_json(r) for r in
                              await access().visible_approvals(who, requests)]}

    @server.tool()
    async def approvals_list(ctx: Context, status: str = "pending") -> Answer:
        """Approval requests of a status (pending, approved, denied, expired;
        comma-separated), of the conversations the caller may see."""
        return await _answer(listing(ctx, status))

    async def decide(ctx: Context, tool: str, request_id: str,
                     reason: str | None) -> dict[str, Any]:
        who = await audit(ctx, tool, "approvals.decide")
        await access().approval(who, runtime.approvals, request_id,
                                surface=f"mcp:{caller_kind(who)}:{tool}")
        verb = runtime.approve if tool == "approve" else runtime.deny
        resumed = await verb(request_id, by=who, reason=reason)
        return {"request": request_json(resumed.request),
                "result": resumed.result.to_dict() if resumed.result is not None else None}

    @server.tool()
    async def approve(request_id: str, ctx: Context, reason: str | None = None) -> Answer:
        """Approve a held call: it runs once and the paused turn answers."""
        return await _answer(decide(ctx, "approve", request_id, reason))

    @server.tool()
    async def deny(request_id: str, ctx: Context, reason: str | None = None) -> Answer:
        """Deny a held call: the paused turn answers without it."""
        return await _answer(decide(ctx, "deny", request_id, reason))

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
