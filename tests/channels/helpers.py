"""Runtimes whose calls wait for approval (get_usage; a payroll tool), tokens for four
actors, a model that echoes, a real uvicorn server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from overt.channels.auth import Tokens, token_digest
from overt.channels.transcript import Transcript
from overt.ledger.base import Ledger
from overt.models.base import Model
from overt.models.fake import FunctionModel, ScriptedModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.tools import tool
from overt.types import ModelRequest

OPERATOR = "op-token"
CLIENT = "client-token"
APPROVER = "approver-token"
OTHER = "other-token"
TOKENS = Tokens({token_digest(OPERATOR): "operator:alice",
                 token_digest(CLIENT): "mcp_client:claude-code",
                 token_digest(APPROVER): "mcp_client:approver",
                 token_digest(OTHER): "mcp_client:other"})

USAGE_CALL = {"tool_calls": [{"name": "get_usage", "arguments": {}}]}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_runtime(ledger: Ledger, tmp_path: Path, replies: list[Any] | Model) -> Runtime:
    """Built-in tools; get_usage needs approval; ``mcp_client:approver`` may decide, and
    see every session (``sessions.read_any``); ``mcp_client:other`` may decide approvals
    of its own sessions. ``replies``: a script, or a model."""
    deciding = ["agent.ask", "trail.read", "approvals.read", "approvals.decide", "memory.read"]
    gate = Gate(Policy([Rule("usage-is-private", "ask", "usage_is_private",
                             "usage figures are shown after approval",
                             tools=("get_usage",))]),
                Capabilities({"mcp_client:approver": [*deciding, "sessions.read_any"],
                              "mcp_client:other": deciding}))
    model = ScriptedModel(replies) if isinstance(replies, list) else replies
    return Runtime(model=model, ledger=ledger,
                   transcript=Transcript(tmp_path / "transcript.jsonl"), gate=gate)


def payroll_runtime(ledger: Ledger, model: Model) -> Runtime:
    """A runtime with one tool, ``payroll``, whose every call asks for approval."""
    @tool(read_only=True)
    async def payroll(month: str) -> dict[str, int]:
        """Payroll total.

        Args:
            month: YYYY-MM.
        """
        return {"total": 42}

    gate = Gate(Policy([Rule("payroll-asks", "ask", "payroll_is_private",
                             "payroll is shown after approval", tools=("payroll",))]))
    return Runtime(model=model, ledger=ledger, tools=[payroll], gate=gate)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def uvicorn_server(app: Any, *, graceful_shutdown_s: int | None = None) -> Iterator[str]:
    """``app`` served by a real uvicorn on a free port, in a thread; its base URL.

    ``graceful_shutdown_s``: how long shutdown waits for open connections (event
    streams) before cutting them; None waits for them to end.
    """
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=graceful_shutdown_s))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = threading.Event()
    for _ in range(1000):
        if server.started:
            break
        started.wait(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive()


def echo_model() -> FunctionModel:
    """A model that answers ``re: {the last user message}``; its ``requests`` hold what
    it was sent."""
    def reply(request: ModelRequest) -> str:
        last = [m.content for m in request.messages if m.role == "user"][-1]
        return f"re: {last}"
    return FunctionModel(reply)


def said(request: ModelRequest) -> list[tuple[str, str]]:
    """(role, text) of what a model request holds besides the system prompt."""
    return [(m.role, m.content) for m in request.messages if m.role != "system"]
