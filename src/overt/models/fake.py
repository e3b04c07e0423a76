"""Models for tests, docs and replays: a scripted model and a function model.

They are public API: drive the engine with them the way pydantic-ai's
``TestModel`` or httpx's ``MockTransport`` drive their libraries.

Both stream (:class:`~overt.models.base.StreamingModel`): a reply's text is
sent in pieces, a word and the space after it each, then the reply is
returned; ``stream_pace_s`` waits that long before each piece (a model that
writes at a fixed pace, for benchmarks), 0 by default.

A scripted model file (``--model scripted:FILE``) is JSONL, one model reply a
line: ``{"text": "...", "tool_calls": [{"name": "...", "arguments": {...}}]}``,
either key optional. Blank lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from overt import json_input
from overt.errors import ModelError, UsageError
from overt.ids import new_ulid
from overt.models.base import TextSink
from overt.types import ModelRequest, ModelResponse, ToolCall, Usage

Reply = ModelResponse | Mapping[str, Any] | str | BaseException
_PIECE = re.compile(r"\s*\S+\s*|\s+")


async def stream_text(text: str, on_text: TextSink, pace_s: float = 0.0) -> None:
    """Send ``text`` to ``on_text`` a word at a time (white space kept), waiting
    ``pace_s`` before each piece."""
    for piece in _PIECE.findall(text):
        if pace_s > 0:
            await asyncio.sleep(pace_s)
        on_text(piece)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def reply_from_mapping(data: Mapping[str, Any], *, model: str) -> ModelResponse:
    """Build a reply from ``{"text": ..., "tool_calls": [...]}``.

    Raises:
        UsageError: the mapping is not of that shape.
    """
    if not isinstance(data, Mapping):
        raise UsageError(f"a scripted reply must be a JSON object, got {type(data).__name__}")
    unknown = set(data) - {"text", "tool_calls", "reasoning"}
    if unknown:
        raise UsageError(f"unknown keys in scripted reply: {sorted(unknown)}")
    text = data.get("text", "")
    if not isinstance(text, str):
        raise UsageError("'text' of a scripted reply must be a string")
    raw_calls = data.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise UsageError("'tool_calls' of a scripted reply must be a list")
    calls = []
    for raw in raw_calls:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise UsageError("each scripted tool call needs a string 'name'")
        args = raw.get("arguments", {})
        if not isinstance(args, Mapping):
            raise UsageError("'arguments' of a scripted tool call must be an object")
        calls.append(ToolCall(id=str(raw.get("id") or new_ulid()), name=raw["name"],
                              arguments=dict(args)))
    reasoning = data.get("reasoning", "")
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=Usage(0, _estimate_tokens(text)),
        model=model,
        stop_reason="tool_use" if calls else "end_turn",
        reasoning=reasoning if isinstance(reasoning, str) else "",
    )


def to_response(reply: Reply, *, model: str) -> ModelResponse:
    """A reply as a :class:`ModelResponse`; an exception instance is raised."""
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, ModelResponse):
        return reply
    if isinstance(reply, str):
        return reply_from_mapping({"text": reply}, model=model)
    return reply_from_mapping(reply, model=model)


def _replies_in_turn(request: ModelRequest) -> int:
    """How many replies the turn ``request`` belongs to has had: its assistant
    messages after its last user message."""
    count = 0
    for message in reversed(request.messages):
        if message.role == "user":
            break
        count += message.role == "assistant"
    return count


class ScriptedModel:
    """Answers from a queue of replies, one per call, in order.

    A reply is a :class:`ModelResponse`, a mapping in the JSONL shape, a plain
    string (a final answer), or an exception instance (raised, to script a
    provider failure). Running out of replies is a :class:`ModelError`.

    ``replay_turn``: the first request this model gets may come from a turn begun
    elsewhere (paused for approval in another process, and resumed here on the
    model it ran on): the replies that turn already had (one per assistant message
    after its last user message) are skipped first, so a script replays one turn
    the same in one process or two. ``scripted:FILE`` models are built so.
    """

    def __init__(self, replies: Iterable[Reply], *, name: str = "scripted",
                 context_window: int | None = None, replay_turn: bool = False,
                 stream_pace_s: float = 0.0) -> None:
        """``context_window``: the window the engine fits requests into (tokens
        estimated by :func:`overt.sessions.estimate_tokens`); ``None``: unlimited.
        ``stream_pace_s``: see the module docstring."""
        self.name = name
        self.stream_pace_s = stream_pace_s
        self.context_window = context_window
        self._replies: deque[Reply] = deque(replies)
        self.requests: list[ModelRequest] = []
        self._replay_turn = replay_turn

    @classmethod
    def from_jsonl(cls, path: str | Path, *, name: str | None = None,
                   replay_turn: bool = False) -> ScriptedModel:
        """Load replies from a JSONL file.

        Raises:
            UsageError: the file is missing or a line is not a valid reply
                (the message names the line).
        """
        p = Path(path)
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read scripted model file {p}: {exc}") from exc
        name = name or f"scripted:{p.name}"  # the replies carry the model's name too
        replies: list[Reply] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                replies.append(reply_from_mapping(json_input.loads(line, what="the reply"),
                                                  model=name))
            except (json.JSONDecodeError, UsageError) as exc:
                raise UsageError(f"{p}:{number}: not a scripted reply: {exc}") from exc
        return cls(replies, name=name, replay_turn=replay_turn)

    @property
    def remaining(self) -> int:
        return len(self._replies)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._replay_turn and not self.requests:
            for _ in range(_replies_in_turn(request)):
                if self._replies:
                    self._replies.popleft()
        self.requests.append(request)
        if not self._replies:
            raise ModelError(f"{self.name}: no scripted reply left")
        return to_response(self._replies.popleft(), model=self.name)

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The next reply, its text sent to ``on_text`` a word at a time first."""
        response = await self.complete(request)
        await stream_text(response.text, on_text, self.stream_pace_s)
        return response


ReplyFunction = Callable[[ModelRequest], Awaitable[Reply] | Reply]


class FunctionModel:
    """Computes each reply from the request with a function (sync or async)."""

    def __init__(self, function: ReplyFunction, *, name: str = "function",
                 context_window: int | None = None, stream_pace_s: float = 0.0) -> None:
        """``context_window`` and ``stream_pace_s``: as for :class:`ScriptedModel`."""
        self.name = name
        self.stream_pace_s = stream_pace_s
        self.context_window = context_window
        self._function = function
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        reply = self._function(request)
        if isinstance(reply, Awaitable):
            reply = await reply
        return to_response(reply, model=self.name)

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The computed reply, its text sent to ``on_text`` a word at a time first."""
        response = await self.complete(request)
        await stream_text(response.text, on_text, self.stream_pace_s)
        return response
