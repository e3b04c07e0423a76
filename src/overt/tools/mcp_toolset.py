"""Tools of other MCP servers, offered to the model as overt tools (``mcp`` extra).

Each configured server (``[mcp_servers.NAME]``: a ``command`` run over stdio, or a
streamable HTTP ``url``) is asked for its tools when the runtime starts; each
becomes ``NAME__TOOL`` in the registry, so it goes through the same gate and is
recorded like any tool: capability ``tool.NAME__TOOL``, read-only only when the
server marks it ``readOnlyHint`` or the config lists it in ``read_only`` (else the
policy treats it as mutating and, by default, asks). Arguments are checked
against the server's schema for names and required fields; the server checks
the rest and its error reaches the model as an ``is_error`` result.

Each server gets one client session (:class:`McpConnection`; a stdio server is
one process), opened when the runtime starts and kept for its lifetime: a call
costs a round trip, not a process start. A session that broke (the server
exited, the connection dropped, a call timed out, or an HTTP server answered
404 to the session's ``Mcp-Session-Id``: it was restarted or forgot the
session) is replaced by a new one, and that is recorded (``hook.error``,
consequence ``reopened``) and logged. What becomes of the call that found it
depends on whether the server can have run it:

- it never reached the server (the stdio server had exited before the call was
  handed to it, or the HTTP server answered 404 for the session id, which the
  MCP specification makes a refusal of the request): the call is sent again,
  once, on the new session, and the model sees its result;
- it may have reached it (the server died or stopped answering after the
  request was written): the call fails with an error the model sees, and is
  not sent again, since running a tool twice (a note written twice, a payment
  made twice) is worse than saying it may not have run.

:meth:`McpSessions.close` (``Runtime.close``) ends the sessions. A session
belongs to the event loop it was opened on; a runtime used from another loop
(``run_sync`` twice) opens its own there.

An HTTP server is sent ``headers`` (``[mcp_servers.NAME] headers``, and
``Authorization: Bearer ...`` from the environment variable ``bearer_token_env``
names, read when the config is loaded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, create_model

from overt.errors import ConfigError, ExtraMissingError, ToolError
from overt.events import Event, HookError
from overt.ledger.canonical import digest_text
from overt.tools.base import Tool, _Arguments

log = logging.getLogger("overt.tools.mcp")

Record = Callable[[list[Event], dict[str, str]], Awaitable[object]]
"""Where a connection records what happened to it (the runtime's ledger)."""

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
    headers: Mapping[str, str] = field(default_factory=dict)
    """Sent with every request to an HTTP server (the bearer token among them)."""

    def __post_init__(self) -> None:
        if not self.name or _UNSAFE.search(self.name):
            raise ConfigError(f"mcp_servers: {self.name!r} must be letters, digits, _ or -")
        if bool(self.command) == bool(self.url):
            raise ConfigError(f"mcp_servers.{self.name}: give exactly one of command or url")
        if self.headers and self.url is None:
            raise ConfigError(f"mcp_servers.{self.name}: headers are for a url server")

    def __repr__(self) -> str:  # never show header values: they hold tokens
        return (f"McpServerSpec(name={self.name!r}, command={self.command!r}, "
                f"url={self.url!r}, headers={sorted(self.headers)!r})")


class _Link:
    """What one session's transport saw: the requests handed to it, whether the
    server's side ended (a stdio server's stdout closed: it exited), and whether an
    HTTP server answered 404 to the session's id (it no longer knows the session)."""

    def __init__(self) -> None:
        self.requests_handed = 0
        self.ended = asyncio.Event()
        self.session_unknown = False

    async def on_response(self, response: Any) -> None:
        """httpx's response hook: a 404 to a request that carried the session id."""
        if response.status_code == 404 and response.request.headers.get("mcp-session-id"):
            self.session_unknown = True


class _WatchedRead:
    """A transport's read stream that notes in ``link`` when it ends."""

    def __init__(self, inner: Any, link: _Link) -> None:
        self._inner, self._link = inner, link

    def __getattr__(self, name: str) -> Any:  # last_context and the like, as the SDK reads them
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        import anyio
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._link.ended.set()
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        import anyio
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self._inner.__aexit__(*exc))


class _CountingWrite:
    """A transport's write stream that counts the requests it accepted: a request it
    refused (the stream closed, as when the stdio server exited) never reached
    the server. One whose send was interrupted counts as accepted."""

    def __init__(self, inner: Any, link: _Link) -> None:
        self._inner, self._link = inner, link

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any, /) -> None:
        import anyio
        from mcp_types import JSONRPCRequest

        counts = isinstance(getattr(item, "message", None), JSONRPCRequest)
        try:
            await self._inner.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise  # not handed over: the server never saw it
        except BaseException:
            self._link.requests_handed += counts  # interrupted: it may have been taken
            raise
        self._link.requests_handed += counts

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _CountingWrite:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self._inner.__aexit__(*exc))


@contextlib.asynccontextmanager
async def _watched(transport: Any, link: _Link) -> Any:
    """``transport`` (an SDK transport) with its streams reporting to ``link``."""
    async with transport as (read, write):
        yield _WatchedRead(read, link), _CountingWrite(write, link)


def _open(spec: McpServerSpec, stack: contextlib.AsyncExitStack, link: _Link) -> Any:
    """The SDK's client for ``spec`` (entered on ``stack`` by the caller)."""
    try:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
    except ImportError as exc:
        raise ExtraMissingError("mcp", "mcp") from exc
    if spec.url is None:
        params = StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]),
                                       env=dict(spec.env) or None)
        return Client(_watched(stdio_client(params), link), read_timeout_seconds=spec.timeout_s)
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    http = create_mcp_http_client(headers=dict(spec.headers) or None)
    http.event_hooks = {"response": [link.on_response]}
    stack.push_async_callback(http.aclose)
    return Client(_watched(streamable_http_client(spec.url, http_client=http), link),
                  read_timeout_seconds=spec.timeout_s)


def _breaks_session(exc: BaseException, link: _Link | None = None) -> bool:
    """Whether a call's failure means the session is gone (the server exited, the
    connection dropped, it stopped answering, or an HTTP server answered 404 to the
    session's id), not that the call was refused."""
    try:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
    except ImportError:  # pragma: no cover - the extra is there if a session was opened
        return True
    if isinstance(exc, MCPError):
        # the SDK turns a 404 into an error like any other (INVALID_REQUEST, with the
        # server's own message): the status its transport saw tells them apart
        return exc.error.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT) or \
            (link is not None and link.session_unknown)
    return True


class McpConnection:
    """One client session to one server, kept open and shared by its tools' calls."""

    def __init__(self, spec: McpServerSpec, record: Record | None = None) -> None:
        self.spec = spec
        self._record = record
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._client: Any = None
        self._link = _Link()
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._broken: BaseException | None = None
        self.opened = 0
        """How many sessions were opened (one, unless some broke)."""
        self.resent = 0
        """How many calls were sent again on a new session (they never reached the old)."""

    async def list_tools(self) -> list[Any]:
        """The server's tools (asked again on a new session, once, when the session
        broke: listing changes nothing on the server).

        Raises:
            Exception: the server could not be started or reached, or failed.
        """
        for last in (False, True):
            client, link = await self._session()
            try:
                return list((await client.list_tools()).tools)
            except Exception as exc:
                await self._lost(exc)
                if last or not _breaks_session(exc, link):
                    raise
                log.warning("MCP server %s: tools asked again on a new session",
                            self.spec.name)
        raise AssertionError("unreachable")  # pragma: no cover

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """The server's result of ``name`` (``CallToolResult``).

        A session that broke before the call reached the server is replaced and the
        call sent again, once (see the module docstring); one that broke after is
        replaced for the next call, and this one fails.

        Raises:
            Exception: the session could not be opened, or broke during the call, or
                the call failed again on a new session.
        """
        for last in (False, True):
            client, link = await self._session()
            handed, ended = link.requests_handed, link.ended.is_set()
            try:
                return await client.call_tool(name, dict(arguments))
            except Exception as exc:
                if not _breaks_session(exc, link):
                    raise
                await self._lost(exc)
                # the server had gone before the call was handed over, or refused the
                # session: it cannot have run it
                unsent = ended or link.session_unknown or link.requests_handed == handed
                if last or not unsent:
                    raise
                self.resent += 1
                log.warning("MCP server %s: the call to %s never reached it (%s); "
                            "sending it again on a new session", self.spec.name, name,
                            "it answered 404 to the session id" if link.session_unknown
                            else "the session had ended")
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def ended(self) -> asyncio.Event:
        """Set once the server's side of the current session ended (a stdio server's
        output closed, as it does when the server exits)."""
        return self._link.ended

    async def close(self) -> None:
        """End the session (its server process exits); the next call opens a new one."""
        holder, stop = self._holder, self._stop
        self._client = self._holder = self._stop = None
        if holder is None or stop is None or holder.get_loop() is not _running_loop():
            return  # none, or on a loop that is gone: its end ended the session
        stop.set()
        with contextlib.suppress(Exception):  # a session that broke: nothing to end
            await holder

    async def _session(self) -> tuple[Any, _Link]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or another event loop than before
            self._loop, self._lock = loop, asyncio.Lock()
            self._client = self._holder = self._stop = None
        assert self._lock is not None
        async with self._lock:
            if self._client is not None and self._holder is not None \
                    and not self._holder.done() and self._broken is None:
                return self._client, self._link
            if self._broken is not None:
                await self._reopening(self._broken)
            await self.close()
            ready: asyncio.Future[Any] = loop.create_future()
            self._stop = asyncio.Event()
            link = _Link()
            self._holder = loop.create_task(self._hold(ready, self._stop, link),
                                            name=f"overt-mcp-session:{self.spec.name}")
            self._client = await ready
            self._link = link
            self._broken = None
            self.opened += 1
            return self._client, link

    async def _hold(self, ready: asyncio.Future[Any], stop: asyncio.Event, link: _Link) -> None:
        """Open the session, hand it over, keep it until ``stop`` (in its own task, as the
        SDK's task groups must be left by the task that entered them)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(_open(self.spec, stack, link))
                ready.set_result(client)
                await stop.wait()
        except Exception as exc:  # noqa: BLE001  any failure: to the opener, or the next call
            if not ready.done():
                ready.set_exception(exc)
            else:  # it broke while open: the next call opens another
                self._broken = self._broken or exc
                log.warning("MCP server %s: session ended: %s: %s", self.spec.name,
                            type(exc).__name__, exc)

    async def _lost(self, exc: BaseException) -> None:
        log.warning("MCP server %s: session lost: %s: %s", self.spec.name,
                    type(exc).__name__, exc)
        self._broken = exc

    async def _reopening(self, cause: BaseException) -> None:
        """Record that the session broke and a new one is opened."""
        log.warning("MCP server %s: opening a new session", self.spec.name)
        if self._record is None:
            return
        message = f"{type(cause).__name__}: {cause}"
        digest = digest_text(message)
        await self._record([HookError(plugin=f"mcp:{self.spec.name}", hook="session",
                                      error_type=type(cause).__name__,
                                      consequence="reopened", error_digest=digest)],
                           {digest: message})


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class McpSessions:
    """The connections of one runtime, one per server; closed with it."""

    def __init__(self, record: Record | None = None) -> None:
        self._record = record
        self.connections: dict[str, McpConnection] = {}

    def connection(self, spec: McpServerSpec) -> McpConnection:
        """The connection to ``spec``'s server (made on first use, not opened yet)."""
        found = self.connections.get(spec.name)
        if found is None:
            found = self.connections[spec.name] = McpConnection(spec, self._record)
        return found

    async def close(self) -> None:
        """End every session."""
        for connection in self.connections.values():
            await connection.close()


async def load_toolset(spec: McpServerSpec,
                       connection: McpConnection | None = None) -> list[Tool]:
    """The server's tools as overt tools, calling it through ``connection`` (default:
    a connection of their own).

    Raises:
        ExtraMissingError: the ``mcp`` extra is not installed.
        ConfigError: two of its tools' names are one overt name.
        Exception: the server could not be started or reached (the caller records it).
    """
    link = connection or McpConnection(spec)
    remote = await link.list_tools()
    tools = [_tool(spec, t, link) for t in remote]
    named: dict[str, str] = {}
    for theirs, ours in zip(remote, tools, strict=True):
        if ours.name in named:  # made safe and cut to 64, two names became one
            raise ConfigError(f"mcp_servers.{spec.name}: tools {named[ours.name]!r} and "
                              f"{theirs.name!r} would both be {ours.name!r}")
        named[ours.name] = theirs.name
    return tools


def _tool(spec: McpServerSpec, remote: Any, link: McpConnection) -> Tool:
    name = _UNSAFE.sub("_", f"{spec.name}__{remote.name}")[:64]
    schema: dict[str, Any] = dict(remote.input_schema or {"type": "object", "properties": {}})
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise ConfigError(f"mcp_servers.{spec.name}: tool {remote.name!r}: its schema's "
                          "properties are not an object")
    required = set(schema.get("required") or ())
    # each argument is a field of its own name by alias: the server's names need not be
    # Python's ("file-path", "_n"), and none is left out of what the model may send
    keys = {f"arg{i}": key for i, key in enumerate(properties)}
    fields: dict[str, Any] = {
        field_name: (Any, Field(... if key in required else None, alias=key,
                                description=_description(properties[key])))
        for field_name, key in keys.items()}
    model = create_model(f"{name}_arguments", __base__=_Arguments, **fields)
    hints = remote.annotations
    read_only = remote.name in spec.read_only or bool(hints and hints.read_only_hint)
    remote_name = remote.name

    async def call(**arguments: Any) -> Any:
        sent = {keys[k]: v for k, v in arguments.items() if v is not None or keys[k] in required}
        result = await link.call_tool(remote_name, sent)
        text = "\n".join(_readable(c) for c in result.content)
        if result.is_error:
            raise McpToolError(text or f"{remote_name} failed")
        if text or result.structured_content is None:
            return text  # what the server said for a model to read
        return result.structured_content

    return Tool(name=name, description=remote.description or f"{remote.name} ({spec.name})",
                function=call, arguments_model=model, input_schema=schema,
                read_only=read_only, capability=None, timeout_s=spec.timeout_s,
                context_param=None, is_async=True, inline=False)


def _description(prop: object) -> str | None:
    found = prop.get("description") if isinstance(prop, Mapping) else None
    return found if isinstance(found, str) else None


def _readable(content: Any) -> str:
    """One content block of a result as text for the model: text as it is, a
    resource's text with its URI, and what is not text (an image, audio, a binary
    resource, a link) named in brackets rather than dropped unsaid."""
    kind = getattr(content, "type", "")
    if kind == "text":
        return str(content.text)
    if kind == "resource":
        inner = content.resource
        if isinstance(getattr(inner, "text", None), str):
            return f"[resource {inner.uri}]\n{inner.text}"
        return f"[binary resource {inner.uri} ({inner.mime_type or 'no type'}), not shown]"
    if kind == "resource_link":
        return f"[resource link {content.uri}: {content.name}]"
    if kind in ("image", "audio"):
        return f"[{kind} ({content.mime_type}), not shown: tool results reach the model as text]"
    return f"[{kind or type(content).__name__} content, not shown]"


def specs_from_config(servers: Mapping[str, Mapping[str, Any]],
                      environ: Mapping[str, str] | None = None) -> list[McpServerSpec]:
    """``[mcp_servers.NAME]`` tables as specs; ``environ`` holds the variables that
    ``bearer_token_env`` names (the entry point passes ``os.environ``).

    Raises:
        ConfigError: a table gives neither or both of command and url, or names a
            token variable that is not set.
    """
    out = []
    for name, table in servers.items():
        command: Sequence[str] = table.get("command") or ()
        headers = {str(k): str(v) for k, v in (table.get("headers") or {}).items()}
        variable = table.get("bearer_token_env")
        if variable:
            token = (environ or {}).get(variable)
            if not token:
                raise ConfigError(f"mcp_servers.{name}: bearer_token_env names "
                                  f"{variable}, which is not set")
            headers["Authorization"] = f"Bearer {token}"
        out.append(McpServerSpec(name, tuple(command), table.get("url"),
                                 dict(table.get("env") or {}),
                                 tuple(table.get("read_only") or ()),
                                 float(table.get("timeout_s", 30.0)), headers))
    return out

