"""The HTTP JSON API of ``overt serve`` (the ``server`` extra: Starlette, uvicorn).

Every ``/v1`` route needs ``Authorization: Bearer TOKEN``; the token names an
actor (:mod:`overt.channels.auth`) and the route names the capability it needs
(:data:`CAPABILITIES`). A refusal is a ``capability.checked`` entry on the
record and a 403. ``/healthz`` and ``/openapi.json`` are open. The OpenAPI
document (:mod:`overt.channels.openapi`) describes exactly these routes; a test
holds the two together.

A message becomes an :class:`~overt.types.IncomingMessage` with source
``http`` and ``request_id`` (so ``caller_session_id`` is ``http:{request_id}``),
runs through the same runtime and gate as every channel, and is answered with
the :class:`~overt.types.ResponseResult`. A turn that paused for approval answers
with ``awaiting_approval`` set; ``wait_s`` keeps the request open until the turn
is answered (whoever approves it, from any process), and ``GET /v1/turns/{id}``
or its event stream give the answer later.

Streaming: with ``"stream": true`` (or ``Accept: text/event-stream``) the answer
comes as Server-Sent Events while the model writes it, then the same JSON as
an event ``done`` (:mod:`overt.channels.answer_sse`); the record is the same.

Sessions: a message without ``session_id`` starts a new session (its id,
``http:{request_id}``, is made here and comes back as ``session_id``); with
one it continues that session, whose history the model then reads. A session
belongs to the actor that started it: the token's actor lists (``GET
/v1/sessions``), reads, continues and streams only its own, unless it holds
``sessions.read_any``; the same goes for the turns and approval requests of
a session (:mod:`overt.sessions.access`). Anything else is answered 404 with the
same message whether or not it exists, and the refusal is recorded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from overt.channels import openapi
from overt.channels.answer_sse import Turns, answer_events
from overt.channels.auth import Tokens
from overt.channels.events_stream import DEFAULT_LIFETIME_S, last_event_id, turn_events
from overt.channels.take_up import SETTLED_S, TAKE_UP_EVERY_S, taking_up
from overt.channels.turns import answered, turn_state, wait_for_answer
from overt.channels.views import MAX_WAIT_S, request_json, trail_json
from overt.clock import period_start
from overt.engine.answer_stream import AnswerSink
from overt.errors import (
    ApprovalError,
    ExtraMissingError,
    LedgerError,
    LedgerUnavailable,
    NotFoundError,
    OvertError,
    UsageError,
)
from overt.events import CapabilityChecked
from overt.ids import new_ulid
from overt.policy.actors import Actor
from overt.reasoning.trail import build_trail
from overt.runtime import Runtime
from overt.sessions import (
    SessionInfo,
    flatten,
    list_sessions,
    session_history,
    session_info,
    title,
)
from overt.sessions.access import NO_SESSION, NO_TURN, Refused, SessionAccess
from overt.types import IncomingMessage, ResponseResult
from overt.version import __version__

try:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import (
        JSONResponse,
        PlainTextResponse,
        Response,
        StreamingResponse,
    )
    from starlette.routing import BaseRoute, Route
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ExtraMissingError("server", "starlette") from exc

log = logging.getLogger("overt.channels.http")

DEFAULT_MAX_BODY_BYTES = 1_000_000
DEFAULT_SESSIONS = 50
MAX_SESSIONS = 1000

CAPABILITIES: dict[tuple[str, str], str] = {
    ("POST", "/v1/messages"): "agent.ask",
    ("GET", "/v1/sessions"): "agent.ask",
    ("GET", "/v1/sessions/{session_id}"): "agent.ask",
    ("GET", "/v1/turns/{turn_id}"): "trail.read",
    ("GET", "/v1/turns/{turn_id}/events"): "trail.read",
    ("GET", "/v1/sessions/{session_id}/trail"): "trail.read",
    ("GET", "/v1/approvals"): "approvals.read",
    ("GET", "/v1/approvals/{request_id}"): "approvals.read",
    ("POST", "/v1/approvals/{request_id}/approve"): "approvals.decide",
    ("POST", "/v1/approvals/{request_id}/deny"): "approvals.decide",
}
"""The capability each authenticated route needs (approve and deny are checked,
and recorded, by the approval book itself)."""

Handler = Callable[[Request, Actor], Awaitable[Response]]


class ApiError(Exception):
    """An error answered as ``{"error": {"code", "message"}}`` with a status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else \
        {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status,
                        headers=headers)


def create_app(runtime: Runtime, tokens: Tokens, *,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               mcp: ASGIApp | None = None,
               mcp_lifespan: Callable[[], Any] | None = None,
               stream_lifetime_s: float = DEFAULT_LIFETIME_S, close_on_shutdown: bool = True,
               extra_routes: Sequence[BaseRoute] = (),
               take_up_every_s: float | None = TAKE_UP_EVERY_S,
               take_up_settled_s: float = SETTLED_S) -> Starlette:
    """The API as an ASGI app over ``runtime``.

    ``mcp``: an ASGI app (the MCP streamable HTTP transport) served at ``/mcp``
    behind the same bearer tokens; ``mcp_lifespan`` the context manager it needs
    running while the server is up. On startup the runtime is started and decided
    approvals no process took up are resumed (an approved call whose tool started
    and recorded no result is left to ``overt approvals resume``: on the record it
    looks the same as one another worker is running now); on shutdown (after uvicorn has let
    in-flight requests finish) the runtime is closed, unless ``close_on_shutdown``
    is false (the caller owns it). ``extra_routes``: other channels' endpoints
    (Slack's Events API), which authenticate their own way. While it serves, the
    decided approvals no process took up are looked for every ``take_up_every_s``
    (those decided over ``take_up_settled_s`` ago; :mod:`overt.channels.take_up`).
    """
    api = _Api(runtime, tokens, max_body_bytes, stream_lifetime_s)

    documented = openapi.paths()

    def guarded(method: str, path: str, handler: Handler) -> Route:
        capability = CAPABILITIES[(method, path)]
        takes = tuple(p["name"] for p in documented[path][method.lower()].get("parameters", ())
                      if p["in"] == "query")

        async def endpoint(request: Request) -> Response:
            unknown = sorted(k for k in request.query_params if k not in takes)
            if unknown:  # a misspelt ?limt= would be answered as if it were not there
                return _error(422, "invalid", f"unknown query parameter "
                              f"{', '.join(map(repr, unknown))} (this route takes: "
                              f"{', '.join(takes) or 'none'})")
            return await api.call(request, capability, handler)
        return Route(path, endpoint, methods=[method])

    routes: list[BaseRoute] = [
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        guarded("POST", "/v1/messages", api.post_message),
        guarded("GET", "/v1/sessions", api.list_sessions),
        guarded("GET", "/v1/sessions/{session_id}", api.get_session),
        guarded("GET", "/v1/turns/{turn_id}", api.get_turn),
        guarded("GET", "/v1/turns/{turn_id}/events", api.turn_events),
        guarded("GET", "/v1/sessions/{session_id}/trail", api.session_trail),
        guarded("GET", "/v1/approvals", api.list_approvals),
        guarded("GET", "/v1/approvals/{request_id}", api.get_approval),
        guarded("POST", "/v1/approvals/{request_id}/approve", api.approve),
        guarded("POST", "/v1/approvals/{request_id}/deny", api.deny),
    ]
    routes.extend(extra_routes)
    if mcp is not None:
        routes.append(Route("/mcp", _McpGate(mcp, tokens), methods=["GET", "POST", "DELETE"]))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await runtime.start()  # the tools (MCP servers' too) are known from here
        runtime.preload()  # the embedded model loads and warms while the server starts
        # not the calls with no result: another worker may be running them right now
        resumed = await runtime.resume_pending(interrupted=False)
        if resumed:
            log.info("resumed %d decided approval(s) no process had taken up", len(resumed))
        try:
            async with taking_up(runtime, every_s=take_up_every_s,
                                 settled_s=take_up_settled_s):
                if mcp_lifespan is not None:
                    async with mcp_lifespan():
                        yield
                else:
                    yield
        finally:
            await api.turns.drain()  # streamed turns whose client left still finish
            if close_on_shutdown:
                await runtime.close()

    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={HTTPException: _no_route})


API_PATHS = ("/v1/", "/mcp", "/healthz", "/openapi.json")
"""The paths the API answers under (its refusals are JSON; the cockpit has the rest)."""
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


async def _no_route(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a method the route does not take) as
    the API's JSON errors under its paths; the cockpit's pages keep plain text."""
    status = getattr(exc, "status_code", 500)
    detail = str(getattr(exc, "detail", "")) or "error"
    headers = getattr(exc, "headers", None)
    if not request.url.path.startswith(API_PATHS):
        return PlainTextResponse(detail, status_code=status, headers=headers)
    return JSONResponse({"error": {"code": _HTTP_CODES.get(status, "http_error"),
                                   "message": detail}}, status_code=status, headers=headers)


class _McpGate:
    """The MCP transport behind a bearer token; the token's actor rides in the scope.

    The actor is also the scope's ``user``, which the SDK's session manager binds
    each MCP session to when it is made: a request naming another actor's
    ``Mcp-Session-Id`` (to call tools in it, listen on its stream or DELETE it) is
    answered as an unknown session (404), as the MCP specification asks.
    """

    def __init__(self, app: ASGIApp, tokens: Tokens) -> None:
        from overt.channels.mcp_server import authenticated  # the mcp extra, as `app`
        self.app, self.tokens, self.authenticated = app, tokens, authenticated

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"authorization")
        actor = self.tokens.actor_for_header(raw.decode("latin-1") if raw else None)
        if actor is None:
            await _error(401, "unauthenticated", "a bearer token is required")(
                scope, receive, send)
            return
        scope.setdefault("state", {})["overt_actor"] = actor
        scope["user"] = self.authenticated(actor)
        await self.app(scope, receive, send)


class _Api:
    def __init__(self, runtime: Runtime, tokens: Tokens, max_body_bytes: int,
                 stream_lifetime_s: float) -> None:
        self.runtime, self.tokens = runtime, tokens
        self.max_body_bytes, self.stream_lifetime_s = max_body_bytes, stream_lifetime_s
        self.turns = Turns()

    @property
    def access(self) -> SessionAccess:
        """Who may reach which session, under the runtime's grants as they are now."""
        return SessionAccess(self.runtime.ledger, self.runtime.gate.capabilities)

    async def call(self, request: Request, capability: str, handler: Handler) -> Response:
        actor = self.tokens.actor_for_header(request.headers.get("authorization"))
        if actor is None:
            return _error(401, "unauthenticated", "a bearer token is required")
        check = self.runtime.gate.capabilities.check(actor, capability)
        if not check.granted and capability != "approvals.decide":
            await self.runtime.ledger.record([CapabilityChecked(
                actor=str(actor), capability=capability, granted=False,
                reason_code=check.reason_code,
                subject=f"http:{request.method} {request.url.path}")])
            return _error(403, check.reason_code, check.message)
        try:
            return await handler(request, actor)
        except ApiError as exc:
            return _error(exc.status, exc.code, exc.message)
        except NotFoundError as exc:
            return _error(404, "not_found", str(exc))
        except ApprovalError as exc:
            if not self.runtime.gate.capabilities.check(actor, "approvals.decide").granted:
                return _error(403, "capability_missing", str(exc))
            return _error(409, "already_decided", str(exc))
        except UsageError as exc:
            return _error(422, "invalid", str(exc))
        except LedgerError as exc:  # the database went away (a restart): retry shortly
            log.log(logging.INFO if isinstance(exc, LedgerUnavailable) else logging.ERROR,
                    "%s %s failed: %s", request.method, request.url.path, exc)  # see outage
            return _error(503, "ledger_unavailable", str(exc))
        except OvertError as exc:
            log.error("%s %s failed: %s", request.method, request.url.path, exc)
            return _error(503, "backend_error", str(exc))

    async def body(self, request: Request, schema: str) -> dict[str, Any]:
        """The JSON object in the body, within the size limit, holding only the fields
        of its OpenAPI ``schema`` (a misspelt ``sesion`` would start a new session)."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isascii() and declared.isdigit() \
                and int(declared) > self.max_body_bytes:
            raise ApiError(413, "too_large", f"the body is over {self.max_body_bytes} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise ApiError(413, "too_large", f"the body is over {self.max_body_bytes} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, "malformed_json", f"the body is not JSON: {exc}") from exc
        except RecursionError:  # arrays or objects nested some thousand deep
            raise ApiError(400, "malformed_json", "the body is nested too deeply") from None
        if not isinstance(data, dict):
            raise ApiError(422, "invalid", "the body must be a JSON object")
        if b"\\ud" in raw.lower():  # a \uD800-\uDFFF escape: a lone one is no character
            try:
                json.dumps(data, ensure_ascii=False).encode()
            except UnicodeEncodeError as exc:  # SQLite would change it, PostgreSQL fail
                raise ApiError(422, "invalid", "the body holds a \\u escape of half a "
                                               "surrogate pair, which is not a character "
                                               f"({exc.object[exc.start]!a})") from exc
        fields = openapi.SCHEMAS[schema]["properties"]
        unknown = sorted(str(k) for k in data if k not in fields)
        if unknown:
            raise ApiError(422, "invalid", f"unknown field {', '.join(map(repr, unknown))} "
                                           f"(allowed: {', '.join(fields)})")
        return data

    # -- open routes ----------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi.document(__version__))

    # -- messages and turns ---------------------------------------------------

    async def post_message(self, request: Request, actor: Actor) -> Response:
        body = await self.body(request, "Message")
        text = _field(body, "text", str, required=True)
        if not text.strip():
            raise ApiError(422, "invalid", "text must not be empty")
        session_id = _field(body, "session_id", str)
        if session_id is not None:  # only a session the caller may continue
            await self.access.session(actor, session_id, surface=_surface(request))
        metadata = _field(body, "metadata", dict) or {}
        wait_s = _field(body, "wait_s", (int, float))
        if wait_s is not None and not 0 <= wait_s <= MAX_WAIT_S:
            raise ApiError(422, "invalid", f"wait_s must be a number of seconds, 0 to "
                                           f"{MAX_WAIT_S:g}")
        stream = body.get("stream")
        if stream is not None and not isinstance(stream, bool):
            raise ApiError(422, "invalid", "stream is true or false")
        if stream is None:
            stream = "text/event-stream" in request.headers.get("accept", "")
        request_id = new_ulid()
        message = IncomingMessage("http", text, {
            **{k: v for k, v in metadata.items() if isinstance(k, str)},
            "request_id": request_id, "actor": str(actor)})

        async def turn(on_answer: AnswerSink | None = None) -> ResponseResult:
            return await self.runtime.respond(  # a new session has no history to read
                message, session_id=session_id or message.caller_session_id, actor=actor,
                history=None if session_id is not None else (),
                channel_ids={"http_request_id": request_id}, on_answer=on_answer)

        async def finish(result: ResponseResult) -> dict[str, Any]:
            if result.error is not None and result.error.kind == "ledger_error":
                # the turn stopped before its next effect and the record may not hold
                # its end: the client must not read this as an answer (a PostgreSQL
                # restart: retry shortly)
                raise ApiError(503, "ledger_unavailable",
                               f"turn {result.turn_id} stopped before its next step: "
                               f"{result.error.message}")
            reply: dict[str, Any] = {**result.to_dict(), "request_id": request_id,
                                     "caller_session_id": message.caller_session_id}
            if result.awaiting_approval is not None and wait_s:
                state = await wait_for_answer(self.runtime.ledger, result.turn_id,
                                              timeout_s=float(wait_s))
                if state is not None and state.ended:
                    reply.update(answered(state))
            return reply

        async def last_event(result: ResponseResult) -> tuple[str, dict[str, Any]]:
            try:
                return "done", await finish(result)
            except ApiError as exc:
                return "error", {"error": {"code": exc.code, "message": exc.message}}

        if stream:
            return StreamingResponse(answer_events(self.turns, turn, last_event),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-store"})
        return JSONResponse(await finish(await turn()))

    # -- sessions -------------------------------------------------------------

    async def list_sessions(self, request: Request, actor: Actor) -> Response:
        raw = request.query_params.get("limit", str(DEFAULT_SESSIONS))
        # isdigit() alone takes "²", which int() refuses
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_SESSIONS:
            raise ApiError(422, "invalid", f"limit is a whole number, 1 to {MAX_SESSIONS}")
        owner = None if self.access.reads_any(actor) else str(actor)
        found = await list_sessions(self.runtime.ledger, owner=owner, limit=int(raw))
        return JSONResponse({"sessions": [await self.session_json(info) for info in found]})

    async def get_session(self, request: Request, actor: Actor) -> Response:
        session_id = request.path_params["session_id"]
        await self.access.session(actor, session_id, surface=_surface(request))
        info = await session_info(self.runtime.ledger, session_id)
        if info is None:  # pruned meanwhile
            raise Refused(NO_SESSION)
        history = flatten(await session_history(self.runtime.ledger, session_id))
        return JSONResponse({**await self.session_json(info),
                             "messages": [m.to_dict() for m in history]})

    async def session_json(self, info: SessionInfo) -> dict[str, Any]:
        """One session as the API lists it (its title: its first message, cut short)."""
        return {"session_id": info.session_id, "source": info.source, "owner": info.owner,
                "turns": info.turns, "started_at": info.started_at, "last_at": info.last_at,
                "title": await title(self.runtime.ledger, info)}

    async def get_turn(self, request: Request, actor: Actor) -> Response:
        turn_id = request.path_params["turn_id"]
        await self.access.turn(actor, turn_id, surface=_surface(request))
        state = await turn_state(self.runtime.ledger, turn_id)
        if state is None:  # pruned meanwhile
            raise Refused(NO_TURN)
        return JSONResponse(state.to_dict())

    async def turn_events(self, request: Request, actor: Actor) -> Response:
        turn_id = request.path_params["turn_id"]
        await self.access.turn(actor, turn_id, surface=_surface(request))
        follow = _flag(request.query_params.get("follow", "true"), "follow")
        try:
            after = last_event_id(request.headers.get("last-event-id"))
        except ValueError as exc:
            raise ApiError(422, "invalid", "Last-Event-ID is the id of an event this stream "
                                           "sent (a ledger seq)") from exc
        stream = turn_events(self.runtime.ledger, turn_id, follow=follow, after_seq=after,
                             lifetime_s=self.stream_lifetime_s)
        return StreamingResponse(stream, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    async def session_trail(self, request: Request, actor: Actor) -> Response:
        session_id = request.path_params["session_id"]
        await self.access.session(actor, session_id, surface=_surface(request))
        phases = request.query_params.get("phase")
        since, until = (request.query_params.get(k) for k in ("since", "until"))
        trail = await build_trail(  # a time the client cannot mean is a 422, not no turns
            self.runtime.ledger, session_id=session_id,
            since=period_start(since) if since is not None else None,
            until=period_start(until) if until is not None else None,
            phases=phases.split(",") if phases is not None else None)
        return JSONResponse(trail_json(trail))

    # -- approvals ------------------------------------------------------------

    async def list_approvals(self, request: Request, actor: Actor) -> Response:
        status = request.query_params.get("status")
        statuses = status.split(",") if status is not None else None
        known = ("pending", "approved", "denied", "expired")
        if statuses is not None and not set(statuses) <= set(known):
            raise ApiError(422, "invalid", f"status is one or more of {', '.join(known)}")
        requests = await self.runtime.approvals.list(statuses)  # type: ignore[arg-type]
        visible = await self.access.visible_approvals(actor, requests)
        return JSONResponse({"approvals": [request_json(r) for r in visible]})

    async def get_approval(self, request: Request, actor: Actor) -> Response:
        found = await self.access.approval(actor, self.runtime.approvals,
                                           request.path_params["request_id"],
                                           surface=_surface(request))
        return JSONResponse(request_json(found))

    async def approve(self, request: Request, actor: Actor) -> Response:
        return await self._decide(request, actor, approve=True)

    async def deny(self, request: Request, actor: Actor) -> Response:
        return await self._decide(request, actor, approve=False)

    async def _decide(self, request: Request, actor: Actor, *, approve: bool) -> Response:
        body = await self.body(request, "Decision")
        reason = _field(body, "reason", str)
        request_id = request.path_params["request_id"]
        await self.access.approval(actor, self.runtime.approvals, request_id,
                                   surface=_surface(request))
        decide = self.runtime.approve if approve else self.runtime.deny
        resumed = await decide(request_id, by=actor, reason=reason)
        released = resumed.released
        return JSONResponse({
            "request": request_json(resumed.request),
            "result": resumed.result.to_dict() if resumed.result is not None else None,
            "released": None if released is None else {
                "status": released.status, "content": released.content,
                "is_error": released.is_error},
        })


def _surface(request: Request) -> str:
    """Where a refusal happened, as the record names it: the route, not the ids in it."""
    route = request.scope.get("route")
    return f"http:{request.method} {getattr(route, 'path', request.url.path)}"


def _flag(raw: str, name: str) -> bool:
    """A boolean query parameter (true/false, 1/0, yes/no, in any case)."""
    value = raw.strip().lower()
    if value not in ("true", "1", "yes", "false", "0", "no"):
        raise ApiError(422, "invalid", f"{name} is true or false")
    return value in ("true", "1", "yes")


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], *,
           required: bool = False) -> Any:
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError(422, "invalid", f"{name} is required")
        return None
    if not isinstance(value, kind) or isinstance(value, bool):  # no field is a bool
        raise ApiError(422, "invalid", f"{name} has the wrong type")
    return value
