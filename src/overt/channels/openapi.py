"""The OpenAPI document of the HTTP API, written as data next to its routes.

A test checks that every route of :func:`overt.channels.http.create_app` is here
and every path here is a route, and schemathesis checks the API against it.
"""

from __future__ import annotations

from typing import Any

from overt.events import REASONING_PHASES, TURN_ERROR_KINDS

_ERROR = {"$ref": "#/components/schemas/Error"}
_ID = {"type": "string", "minLength": 1}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    words = {400: "malformed JSON", 401: "no valid bearer token",
             403: "the token's actor lacks the capability", 404: "not found",
             409: "already decided", 413: "the body is too large",
             422: "a field is missing or has the wrong type",
             503: "the ledger or the model could not be used"}
    return {str(c): _json(_ERROR, words[c]) for c in codes}


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": _ID}


def _op(summary: str, capability: str | None, ok: dict[str, Any], *codes: int,
        params: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None, body_required: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {"200": ok, **_errors(*codes)}}
    if capability is not None:
        op["description"] = f"Needs the capability `{capability}`."
        op["security"] = [{"bearer": []}]
    else:
        op["security"] = []
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": body_required,
                             "content": {"application/json": {"schema": body}}}
    return op


_USAGE = {"type": "object", "properties": {
    "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
    "cost_usd": {"type": "number"}}}
_TURN_ERROR = {"type": ["object", "null"], "required": ["kind", "message"],
               "description": "null: the turn answered; else why it ended without its "
                              "answer (branch on kind)",
               "properties": {"kind": {"enum": list(TURN_ERROR_KINDS)},
                              "message": {"type": "string"},
                              "type": {"type": ["string", "null"],
                                       "description": "the exception's type, or the "
                                                      "spending limit that refused"}}}
_TOOLS_USED = {"type": ["array", "null"], "items": {"type": "string"},
               "description": "null: the engine was bypassed, refused or errored; []: no tool"}

_ANSWER_EVENT = {
    "type": "object", "required": ["event", "data"],
    "description": "one Server-Sent Event of a streamed answer; data is JSON: delta "
                   "{text}, reset {reason}, done (the ResponseResult), error (an Error)",
    "properties": {"event": {"enum": ["delta", "reset", "done", "error"]},
                   "data": {"type": "string", "contentMediaType": "application/json"}}}

_NOT_BLANK = ("[^\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a"
              "\\u2028\\u2029\\u202f\\u205f\\u3000]")
"""A character that is not white space as the server reads it (``str.isspace``: it
counts U+001C-U+001F, and not U+FEFF, unlike a JSON Schema pattern's ``\\s``)."""

_LEDGER_EVENT = {
    "type": "object", "required": ["event", "data", "id"],
    "description": "one Server-Sent Event of a turn's stream: event is the entry's kind "
                   "(turn.started, inference, tool_call.completed, ...), id its ledger seq "
                   "(send it back as Last-Event-ID), data the audit entry as JSON {seq, id, "
                   "kind, at, turn_id, session_id, data}",
    "properties": {"event": {"type": "string"}, "id": {"type": "string", "pattern": "^[0-9]+$"},
                   "data": {"type": "string", "contentMediaType": "application/json"}}}

_PERIOD = {"anyOf": [
    {"type": "string", "pattern": "^\\s*([Tt][Oo][Dd][Aa][Yy]|[Aa][Ll][Ll])\\s*$"},
    {"type": "string", "pattern": "^\\s*[0-9]{1,5}\\s*[smhdwSMHDW]\\s*$"},
    {"type": "string", "format": "date-time"}, {"type": "string", "format": "date"}]}
"""What a trail's ``since`` and ``until`` take (:func:`overt.clock.period_start`): today,
all, a duration back from now, or an ISO 8601 time (one before year 1 or after 9999 in
UTC bounds the record at that end). Longer durations work while they stay after year 1."""

SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
    "Message": {"type": "object", "required": ["text"], "additionalProperties": False,
                "properties": {
        "text": {"type": "string", "pattern": _NOT_BLANK,
                 "description": "not empty or only white space"},
        "session_id": {"type": ["string", "null"],
                       "description": "continue this session (one the token's actor "
                                      "owns, or any with sessions.read_any); without "
                                      "it a new session starts, its id in the answer"},
        "metadata": {"type": ["object", "null"]},
        "wait_s": {"type": ["number", "null"], "minimum": 0, "maximum": 300,
                   "description": "if the turn pauses for approval, wait this long for "
                                  "its answer"},
        "stream": {"type": ["boolean", "null"],
                   "description": "answer with Server-Sent Events as the model writes: "
                                  "delta {text}, reset {reason}, then done (the "
                                  "ResponseResult) or error; default: true when Accept "
                                  "names text/event-stream"}}},
    "ResponseResult": {"type": "object", "required": [
        "text", "tools_used", "usage", "error", "session_id", "turn_id", "awaiting_approval"],
        "properties": {
            "text": {"type": "string"}, "tools_used": _TOOLS_USED, "usage": _USAGE,
            "error": _TURN_ERROR, "session_id": {"type": "string"},
            "turn_id": {"type": "string"},
            "awaiting_approval": {"type": ["string", "null"]},
            "request_id": {"type": "string"},
            "caller_session_id": {"type": "string"}}},
    "Turn": {"type": "object", "required": ["turn_id", "status"], "properties": {
        "turn_id": {"type": "string"}, "session_id": {"type": ["string", "null"]},
        "source": {"type": ["string", "null"]},
        "caller_session_id": {"type": ["string", "null"]},
        "status": {"type": ["string", "null"],
                   "description": "running, awaiting_approval, completed, model_error …"},
        "awaiting_approval": {"type": ["string", "null"]},
        "text": {"type": ["string", "null"]}, "tools_used": _TOOLS_USED,
        "error": _TURN_ERROR, "usage": _USAGE,
        "started_at": {"type": "string"}, "completed_at": {"type": ["string", "null"]}}},
    "Session": {"type": "object", "required": [
        "session_id", "owner", "turns", "started_at", "last_at"], "properties": {
        "session_id": {"type": "string"}, "source": {"type": ["string", "null"]},
        "owner": {"type": "string", "description": "the actor that started it"},
        "turns": {"type": "integer"}, "started_at": {"type": "string"},
        "last_at": {"type": "string"}, "title": {"type": ["string", "null"]}}},
    "Sessions": {"type": "object", "required": ["sessions"], "properties": {
        "sessions": {"type": "array", "items": {"$ref": "#/components/schemas/Session"}}}},
    "Conversation": {"allOf": [{"$ref": "#/components/schemas/Session"}, {
        "type": "object", "required": ["messages"], "properties": {"messages": {
            "type": "array", "items": {"type": "object", "required": ["role", "content"],
                                       "properties": {
                                           "role": {"type": "string"},
                                           "content": {"type": "string"},
                                           "tool_calls": {"type": "array"},
                                           "tool_call_id": {"type": "string"}}}}}}]},
    "Trail": {"type": "object", "required": ["turns"], "properties": {
        "session_id": {"type": ["string", "null"]},
        "turns": {"type": "array", "items": {"type": "object"}}}},
    "ApprovalRequest": {"type": "object", "required": ["request_id", "status"],
                        "properties": {"request_id": {"type": "string"},
                                       "status": {"type": "string"},
                                       "tool_name": {"type": "string"},
                                       "turn_id": {"type": ["string", "null"]}}},
    "Approvals": {"type": "object", "required": ["approvals"], "properties": {
        "approvals": {"type": "array",
                      "items": {"$ref": "#/components/schemas/ApprovalRequest"}}}},
    "Decision": {"type": "object", "additionalProperties": False,
                 "properties": {"reason": {"type": ["string", "null"]}}},
    "Decided": {"type": "object", "required": ["request"], "properties": {
        "request": {"$ref": "#/components/schemas/ApprovalRequest"},
        "result": {"oneOf": [{"$ref": "#/components/schemas/ResponseResult"},
                             {"type": "null"}]},
        "released": {"type": ["object", "null"]}}},
}


def _list_of(words: tuple[str, ...]) -> str:
    one = "(" + "|".join(words) + ")"
    return f"^{one}(,{one})*$"


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def paths() -> dict[str, dict[str, Any]]:
    """Path -> method -> operation."""
    auth = (401, 403)
    return {
        "/healthz": {"get": _op("Liveness", None, _json(
            {"type": "object", "required": ["status"], "properties": {
                "status": {"type": "string"}, "version": {"type": "string"}}}, "alive"))},
        "/openapi.json": {"get": _op("This document", None, _json({"type": "object"},
                                                                    "OpenAPI 3.1"))},
        "/v1/messages": {"post": _op(
            "Ask the agent; the turn's ResponseResult (or, streamed, its answer as it "
            "is written, then the ResponseResult)", "agent.ask",
            {"description": "the turn's answer", "content": {
                "application/json": {"schema": _ref("ResponseResult")},
                "text/event-stream": {"schema": _ANSWER_EVENT}}},
            400, *auth, 404, 413, 422,
            503,
            body=_ref("Message"), body_required=True)},
        "/v1/sessions": {"get": _op(
            "Sessions, newest first: the token's actor's own, or every one with "
            "sessions.read_any", "agent.ask", _json(_ref("Sessions"), "sessions"),
            *auth, 422, 503, params=[{
                "name": "limit", "in": "query", "required": False,
                "schema": {"type": "integer", "minimum": 1, "maximum": 1000,
                           "default": 50}}])},
        "/v1/sessions/{session_id}": {"get": _op(
            "A session and its conversation (what was asked and answered, the tool "
            "calls and their results, in order); another actor's session is answered "
            "as a missing one", "agent.ask", _json(_ref("Conversation"), "the session"),
            *auth, 404, 503, params=[_path_param("session_id")])},
        "/v1/turns/{turn_id}": {"get": _op(
            "A turn's state and, once answered, its answer", "trail.read",
            _json(_ref("Turn"), "the turn"), *auth, 404, 503,
            params=[_path_param("turn_id")])},
        "/v1/turns/{turn_id}/events": {"get": _op(
            "The turn's ledger entries as Server-Sent Events, pushed as they are "
            "recorded, until it completes; each event's id is its ledger seq",
            "trail.read", {"description": "an event stream",
                           "content": {"text/event-stream": {"schema": _LEDGER_EVENT}}},
            *auth, 404, 422, 503, params=[_path_param("turn_id"), {
                "name": "follow", "in": "query", "required": False,
                "schema": {"type": "boolean", "default": True}}, {
                "name": "Last-Event-ID", "in": "header", "required": False,
                "schema": {"type": "string", "pattern": "^[0-9]*$"},
                "description": "resume after this event (a reconnecting client sends it)"}])},
        "/v1/sessions/{session_id}/trail": {"get": _op(
            "A session's reasoning trail", "trail.read", _json(_ref("Trail"), "the trail"),
            *auth, 404, 422, 503, params=[_path_param("session_id"), *[
                {"name": n, "in": "query", "required": False, "schema": _PERIOD,
                 "description": "an ISO 8601 time, a duration back from now (24h, 7d), "
                                "today or all"}
                for n in ("since", "until")], {
                "name": "phase", "in": "query", "required": False,
                "schema": {"type": "string", "pattern": _list_of(REASONING_PHASES)},
                "description": "comma-separated phases"}])},
        "/v1/approvals": {"get": _op(
            "Approval requests", "approvals.read", _json(_ref("Approvals"), "requests"),
            *auth, 422, 503, params=[{"name": "status", "in": "query", "required": False,
                                      "schema": {"type": "string", "pattern": _list_of(
                                          ("pending", "approved", "denied", "expired"))},
                                      "description": "comma-separated: pending, approved, "
                                                     "denied, expired"}])},
        "/v1/approvals/{request_id}": {"get": _op(
            "One approval request", "approvals.read", _json(_ref("ApprovalRequest"), "it"),
            *auth, 404, 503, params=[_path_param("request_id")])},
        "/v1/approvals/{request_id}/approve": {"post": _op(
            "Approve; the paused turn answers", "approvals.decide",
            _json(_ref("Decided"), "decided and taken up"), 400, *auth, 404, 409, 413, 422,
            503, params=[_path_param("request_id")], body=_ref("Decision"))},
        "/v1/approvals/{request_id}/deny": {"post": _op(
            "Deny; the paused turn answers without the call", "approvals.decide",
            _json(_ref("Decided"), "decided and taken up"), 400, *auth, 404, 409, 413, 422,
            503, params=[_path_param("request_id")], body=_ref("Decision"))},
    }


def document(version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "overt", "version": version,
                 "description": "The agent's HTTP API: ask, read turns and trails, decide "
                                "approvals. Every /v1 route needs a bearer token. Beside "
                                "it, overt serve offers MCP's streamable HTTP transport at "
                                "/mcp (GET, POST, DELETE; the same bearer tokens; the MCP "
                                "specification describes it), the cockpit's HTML pages at / "
                                "and, when configured, Slack's Events API endpoint."},
        "paths": paths(),
        "components": {"schemas": SCHEMAS, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"}}},
    }
