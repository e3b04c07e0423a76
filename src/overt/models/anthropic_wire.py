"""overt's conversation in the Anthropic Messages API wire format, and replies back.

Requests (:func:`to_wire`):

==========================  ======================================================
overt                       Messages API
==========================  ======================================================
``system`` messages         the top-level ``system`` string (joined)
``user``                    ``{"role": "user", "content": TEXT}``
``assistant``, tool calls   ``{"role": "assistant", "content": [text?,
                            tool_use{id, name, input}...]}``
``tool`` (a run of them)    one ``user`` message of ``tool_result{tool_use_id,
                            content, is_error}`` blocks, in order
a ``ToolSpec``              ``{"name", "description", "input_schema"}``
==========================  ======================================================

Messages of one role in a row are merged into one (the API alternates roles, and
tool results must sit in the single user message after their ``tool_use``s).
Empty text is left out: the API refuses empty text blocks.

Replies (:func:`from_wire`): ``text`` blocks are concatenated, ``tool_use``
blocks become :class:`~overt.types.ToolCall` s, ``thinking`` blocks become the
reasoning (``redacted_thinking`` ones are encrypted: counted, never shown).

With extended thinking on, the API wants the assistant turn that called tools
sent back exactly as it came, thinking blocks and their signatures included,
or it refuses the request. overt's :class:`~overt.types.Message` has no place
for opaque blocks, so :class:`ReplayStore` keeps them, keyed by the turn's
``tool_use`` ids, and :func:`to_wire` echoes them in place of the rebuilt turn.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from overt.errors import ModelError, ModelOutputError
from overt.tools.shapes import to_anthropic
from overt.types import Message, ToolCall, ToolSpec

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
# The fields of each block type that go back to the API when a turn is replayed;
# reply-only fields (citations, caller, parsed output) stay out.
_REPLAY_FIELDS: Mapping[str, tuple[str, ...]] = {
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
    "text": ("text",),
    "tool_use": ("id", "name", "input"),
}

Blocks = tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class WireRequest:
    """The parts of a Messages API request that come from the conversation.

    ``thinking_allowed`` is false when the last assistant turn called tools
    but has no thinking block to send back (it was not answered by this
    adapter, or the blocks were forgotten): the API refuses such a request
    with thinking on, so the adapter sends it without.
    """

    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    thinking_allowed: bool
    replayed: int


@dataclass(frozen=True, slots=True)
class WireReply:
    """A Messages API reply, taken apart."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    reasoning: str
    stop_reason: str
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    blocks: Blocks
    info: dict[str, Any] = field(default_factory=dict)


def to_wire(messages: Sequence[Message], tools: Sequence[ToolSpec],
            replay: Callable[[Message], Blocks | None] | None = None) -> WireRequest:
    """The conversation and tools as Messages API parameters.

    ``replay`` gives the blocks an assistant turn came with (see
    :class:`ReplayStore`), or ``None`` to rebuild the turn from the message.

    Raises:
        ModelError: a tool message has no ``tool_call_id`` to pair it with.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    replayed = 0
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
        elif message.role == "assistant":
            blocks = replay(message) if replay is not None and message.tool_calls else None
            if blocks is not None:
                replayed += 1
            _append(out, "assistant", list(blocks) if blocks is not None
                    else _assistant_blocks(message))
        elif message.role == "tool":
            _append(out, "user", [_tool_result(message)])
        else:
            _append(out, "user", [_text(message.content)] if message.content else [])
    for wire in out:
        content = wire["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            wire["content"] = content[0]["text"]  # the API's shorthand for one text block
    return WireRequest("\n\n".join(system), out, [to_anthropic(t) for t in tools],
                       _thinking_allowed(out), replayed)


def from_wire(data: Mapping[str, Any]) -> WireReply:
    """A Messages API reply (the ``message`` JSON object) taken apart.

    Raises:
        ModelOutputError: it has no ``content`` list of block objects (a reply of
            something else: an empty answer is ``"content": []``).
    """
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    blocks: list[dict[str, Any]] = []
    counts = {"thinking": 0, "redacted_thinking": 0}
    content = data.get("content")
    if not isinstance(content, list) or not all(isinstance(b, Mapping) for b in content):
        raise ModelOutputError("the reply is not a Messages API message: its content is "
                               f"not a list of blocks but {str(content)[:100]!r}")
    for block in content:
        kind = block.get("type")
        if kind not in _REPLAY_FIELDS:
            continue  # server-tool blocks: overt offers no server tools
        blocks.append({"type": kind, **{k: block.get(k) for k in _REPLAY_FIELDS[kind]}})
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "thinking":
            counts["thinking"] += 1
            if block.get("thinking"):
                thoughts.append(str(block["thinking"]))
        elif kind == "redacted_thinking":
            counts["redacted_thinking"] += 1
        else:
            calls.append(_tool_call(block))
    usage = data.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    stop = data.get("stop_reason") or ("tool_use" if calls else "end_turn")
    info: dict[str, Any] = {"message_id": data.get("id"), "api_model": data.get("model")}
    if data.get("stop_sequence") is not None:
        info["stop_sequence"] = data["stop_sequence"]
    if counts["thinking"] or counts["redacted_thinking"]:
        info["thinking_blocks"] = counts["thinking"]
        info["redacted_thinking_blocks"] = counts["redacted_thinking"]
    return WireReply(
        text="".join(texts), tool_calls=tuple(calls), reasoning="\n\n".join(thoughts),
        stop_reason=str(stop), input_tokens=_count(usage, "input_tokens"),
        output_tokens=_count(usage, "output_tokens"),
        cache_creation_input_tokens=_count(usage, "cache_creation_input_tokens"),
        cache_read_input_tokens=_count(usage, "cache_read_input_tokens"),
        blocks=tuple(blocks), info=info)


class ReplayStore:
    """Assistant turns with thinking blocks, as they came, by their ``tool_use`` ids.

    Bounded: the oldest turns are forgotten first. A turn only has to come back
    while its tool round is open, so a few hundred cover any live conversation.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._turns: OrderedDict[tuple[str, ...], Blocks] = OrderedDict()

    def remember(self, reply: WireReply) -> None:
        """Keep ``reply``'s blocks if it called tools and thought first."""
        if not reply.tool_calls or not any(b["type"] in THINKING_BLOCKS for b in reply.blocks):
            return
        key = tuple(c.id for c in reply.tool_calls)
        self._turns[key] = reply.blocks
        self._turns.move_to_end(key)
        while len(self._turns) > self.size:
            self._turns.popitem(last=False)

    def recall(self, message: Message) -> Blocks | None:
        """The blocks of the turn ``message`` was made from, if kept."""
        return self._turns.get(tuple(c.id for c in message.tool_calls))

    def __len__(self) -> int:
        return len(self._turns)


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = [_text(message.content)] if message.content else []
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
               for c in message.tool_calls]
    return blocks


def _tool_result(message: Message) -> dict[str, Any]:
    if not message.tool_call_id:
        raise ModelError("a tool result without a tool_call_id cannot be paired with its "
                         "tool_use block")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id,
                             "is_error": message.is_error}
    if message.content:
        block["content"] = message.content
    return block


def _thinking_allowed(out: Sequence[Mapping[str, Any]]) -> bool:
    for wire in reversed(out):
        if wire["role"] != "assistant":
            continue
        content = wire["content"]
        if isinstance(content, str) or not any(b["type"] == "tool_use" for b in content):
            return True
        return bool(content) and content[0]["type"] in THINKING_BLOCKS
    return True


def _tool_call(block: Mapping[str, Any]) -> ToolCall:
    arguments = block.get("input")
    call_id, name = str(block.get("id") or ""), block.get("name")
    if not isinstance(name, str) or not name:
        return ToolCall(call_id, "", dict(arguments) if isinstance(arguments, Mapping) else {},
                        malformed="the tool_use block has no name")
    if isinstance(arguments, Mapping):
        return ToolCall(call_id, name, dict(arguments))
    return ToolCall(call_id, name, {}, malformed="the tool_use input is not a JSON object")


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) else 0
