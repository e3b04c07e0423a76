"""Value types that cross layers: messages in, model requests and replies, results out.

All are frozen dataclasses: a turn is data, and data does not change under you.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from overt.events import TurnErrorKind

Source = Literal["cli", "http", "slack_dm", "email", "mcp"]
SOURCES: tuple[str, ...] = get_args(Source)

Role = Literal["system", "user", "assistant", "tool"]

UNKNOWN = "unknown"


def derive_caller_session_id(source: str, metadata: Mapping[str, Any]) -> str:
    """Derive the stable, source-shaped id that joins audit lines to their inbound message.

    ============  ====================================  ============================
    source        shape                                 metadata keys used
    ============  ====================================  ============================
    ``slack_dm``  ``"{channel_id}:{event_ts}"``         ``channel_id``, ``event_ts``
    ``email``     ``"email:{message_id}"``              ``message_id``
    ``mcp``       ``"mcp:{caller_actor_kind}:{tool}"``  ``caller_actor_kind``, ``tool_name``
    ``cli``       ``"cli:{session_id}"``                ``session_id``
    ``http``      ``"http:{request_id}"``               ``request_id``
    ============  ====================================  ============================

    Fallback: a missing or empty field is written as ``unknown`` in its place
    (``"C123:unknown"``, ``"email:unknown"``), so the id keeps its shape and a
    log query on the prefix still finds it. The fallback is deterministic on
    purpose: a random id would join nothing.
    """

    def part(key: str) -> str:
        value = metadata.get(key)
        return str(value) if value not in (None, "") else UNKNOWN

    if source == "slack_dm":
        return f"{part('channel_id')}:{part('event_ts')}"
    if source == "email":
        return f"email:{part('message_id')}"
    if source == "mcp":
        return f"mcp:{part('caller_actor_kind')}:{part('tool_name')}"
    if source == "cli":
        return f"cli:{part('session_id')}"
    if source == "http":
        return f"http:{part('request_id')}"
    return f"{source}:{UNKNOWN}"


def text_problem(text: str) -> str:
    """Why ``text`` cannot be kept as written, or ``""``: a lone surrogate, which is
    what bytes that are not UTF-8 become on the command line (``surrogateescape``)
    and what a JSON ``"\\udce9"`` escape decodes to. SQLite would store it as U+FFFD
    (the message silently changed) and PostgreSQL refuse it mid-turn."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        byte = f" (the byte 0x{ord(char) - 0xDC00:02x})" if char >= "\udc80" else ""
        return (f"the text is not valid UTF-8 at character {exc.start}{byte}: nothing "
                "was sent; write it in UTF-8")
    return ""


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A message from the operator, as a channel received it."""

    source: Source
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            from overt.errors import UsageError

            raise UsageError(f"unknown message source {self.source!r}; one of {SOURCES}")
        if problem := text_problem(self.text):
            from overt.errors import UsageError

            raise UsageError(problem)

    @property
    def caller_session_id(self) -> str:
        return derive_caller_session_id(self.source, self.metadata)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model asked for it.

    ``malformed`` is set (with a reason) when the model tried to call a tool
    but its call could not be parsed; the engine answers it with an error
    result instead of executing anything.
    """

    id: str
    name: str
    arguments: Mapping[str, Any]
    malformed: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation sent to a model."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The message as JSON shows it (a session's conversation over HTTP, the CLI)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                                 for c in self.tool_calls]
        if self.tool_call_id is not None:
            out.update(tool_call_id=self.tool_call_id, name=self.name, is_error=self.is_error)
        return out


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool (the Anthropic-like neutral shape), and
    ``read_only``: the describer's word that calling it changes nothing (the gate
    treats a tool without it as mutating; it is not sent to models)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and money spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            round(self.cost_usd + other.cost_usd, 10),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a model is asked, in one value."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A model's reply.

    ``info`` describes how it was produced (model file digest, runtime version,
    sampling parameters); it is recorded with the inference and must hold
    identifiers and numbers only, never content.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    model: str = ""
    stop_reason: str = "end_turn"
    reasoning: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)
    sent: Mapping[str, Any] | None = None
    """The payload the adapter sent for this reply, after its own transformations (a
    provider's request body; the embedded model's rendered prompt, grammar, seed),
    when it has one of its own; ``None`` for a model that is sent the request as it
    is (the fakes). Recorded in the content tier (:mod:`overt.engine.request_body`)."""
    decisions: tuple[str, ...] = ()
    """What the adapter decided on its own for this reply, as identifiers from
    :data:`overt.models.base.ADAPTER_DECISIONS` (recorded in the audit tier)."""


@dataclass(frozen=True, slots=True)
class TurnError:
    """Why a turn ended without its answer. Branch on ``kind``; ``message`` is for people.

    ``kind`` is one of a closed set (:data:`overt.events.TURN_ERROR_KINDS`):

    - ``model_error``: the model could not answer: its adapter failed (``type``: the
      exception's type), or the conversation does not fit its window (``type``:
      ``ContextWindowExceeded``).
    - ``budget_exceeded``: a spending limit refused the next model call (``type``: the
      limit, such as ``session_tokens``).
    - ``ledger_error``: the ledger could not record the turn, so it stopped before its
      next effect (``type``: ``LedgerUnavailable`` when the server is out of reach).
    """

    kind: TurnErrorKind
    message: str
    type: str | None = None

    def __str__(self) -> str:
        return ": ".join(part for part in (self.kind, self.type, self.message) if part)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "type": self.type}


@dataclass(frozen=True, slots=True)
class ResponseResult:
    """The outcome of one turn.

    ``tools_used`` has three states: ``None`` when the engine was bypassed,
    refused or errored; ``[]`` when it reasoned and chose no tool; otherwise
    the names of the tools it ran, oldest first, duplicates kept.
    """

    text: str
    tools_used: list[str] | None
    usage: Usage
    error: TurnError | None
    """Why the turn ended without its answer; ``None`` when it answered."""
    session_id: str
    turn_id: str
    awaiting_approval: str | None = None
    """The approval request the turn is paused on; the answer comes when it is decided."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tools_used": self.tools_used,
            "usage": self.usage.to_dict(),
            "error": self.error.to_dict() if self.error is not None else None,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "awaiting_approval": self.awaiting_approval,
        }
