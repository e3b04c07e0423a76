"""The values an engine is configured with and a turn ends in."""

from __future__ import annotations

from dataclasses import dataclass, field

from overt.tools.base import Tool
from overt.types import Message, ResponseResult, ToolCall


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Limits of one turn."""

    max_tool_calls: int = 5
    """Tool calls run per model response; calls past it are refused."""
    max_tool_calls_per_turn: int = 25
    """Tool calls run in one turn; past it the model answers without tools."""
    max_consecutive_tool_errors: int = 3
    tool_timeout_s: float | None = 30.0
    max_tool_result_chars: int | None = 50_000
    """What the model reads of one tool result, at most; the rest is cut, and the
    model is told so (:func:`overt.engine.limits.bounded_result`). The record keeps
    the whole result. ``None``: no limit."""
    route: str = "default"
    max_output_tokens: int | None = None
    agent: str = "default"
    """The agent's name: it acts as ``agent:NAME`` on every route."""
    model_spec: str | None = None
    """The spec the engine's model was built from (``local``, ``openai:NAME``, an
    alias): a paused turn's checkpoint records it, so the turn resumes on that model
    in whichever process approves it (``None``: the model's name is recorded)."""


@dataclass(frozen=True, slots=True)
class Held:
    """A call the gate held for approval: the turn pauses on ``request_id``."""

    call: ToolCall
    request_id: str
    message: str
    expires_at: str


@dataclass(frozen=True, slots=True)
class Allowed:
    """A call the gate allowed, not yet run: the tool to run (``None``: a tool a plugin
    offers, whose result a plugin may provide) and the digest of its arguments."""

    tool: Tool | None
    args_digest: str


@dataclass(slots=True)
class TurnOutcome:
    """A finished turn: the result, and the conversation as the model last saw it."""

    result: ResponseResult
    messages: list[Message] = field(default_factory=list)
