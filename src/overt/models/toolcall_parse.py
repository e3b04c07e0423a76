"""Turn a small model's raw output into answer text and tool calls.

Small local models write tool calls in one of three shapes, and this module
accepts all of them:

1. Qwen's native tags, possibly several, possibly unclosed at end of output::

       <tool_call>{"name": "get_usage", "arguments": {"days": 1}}</tool_call>

2. Bare JSON: a line (or the whole reply) that is a tool-call object, or a
   list of them: ``{"name": "get_usage", "arguments": {}}``.
3. Fenced JSON: a ```` ```json ```` block holding such an object or list.

``"parameters"`` is read as an alias of ``"arguments"``, arguments given as a
JSON string are decoded, and OpenAI's ``{"type": "function", "function": {...}}``
wrapper is unwrapped.

What counts as a call differs by shape, on purpose. Inside ``<tool_call>`` the
model has said it is calling a tool, so anything there becomes a
:class:`~overt.types.ToolCall`: broken JSON gives one with ``malformed`` set
and the name recovered where possible, for the engine to answer with an error.
Outside the tags JSON is often just an answer (a coder model prints
``package.json``), so it is a call only when ``name`` is a string and the
object has an ``arguments``/``parameters`` key or names an offered tool;
anything else stays text.

A call naming a tool that is not offered is still returned: the engine answers
it ``not_allowed``. Parsing never executes or drops anything, and never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from overt.ids import new_ulid
from overt.types import ToolCall

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_TAG_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|(?=<tool_call>)|\Z)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|tool_call)?[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_LINE_JSON = re.compile(r"^[ \t]*[\[{]", re.MULTILINE)
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)
_DECODER = json.JSONDecoder(parse_constant=lambda c: _reject_constant(c))
_ARG_KEYS = ("arguments", "parameters")


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; the ledger's canonical JSON cannot hold them.
    raise ValueError(f"{name} is not valid JSON")


def _decode_all(body: str) -> tuple[list[Any], str | None]:
    """Decode consecutive JSON values in ``body``; return them and an error, if any."""
    values: list[Any] = []
    pos, end = 0, len(body)
    while True:
        while pos < end and body[pos] in " \t\r\n,;":
            pos += 1
        if pos >= end:
            return values, None
        try:
            value, pos = _DECODER.raw_decode(body, pos)
        except (ValueError, RecursionError) as exc:
            reason = getattr(exc, "msg", None) or type(exc).__name__
            return values, f"invalid JSON ({reason})"
        values.append(value)


def _strip_fence(body: str) -> str:
    body = body.strip()
    match = _FENCE.fullmatch(body)
    if match:
        return match.group(1).strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        return body.rstrip("`").strip()
    return body


def _unwrap(obj: Any) -> Any:
    if isinstance(obj, dict) and "name" not in obj and isinstance(obj.get("function"), dict):
        return obj["function"]
    return obj


def _arguments(obj: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The arguments of a call object, and why they are malformed (``None`` if fine)."""
    raw: Any = {}
    for key in _ARG_KEYS:
        if key in obj:
            raw = obj[key]
            break
    if raw is None:
        return {}, None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        values, error = _decode_all(raw)
        if error or len(values) != 1:
            return {}, f"arguments are a string that is not one JSON object: {error or 'several'}"
        raw = values[0]
    if not isinstance(raw, dict):
        return {}, f"arguments must be a JSON object, got {type(raw).__name__}"
    return raw, None


def _call_from_object(obj: Any) -> ToolCall:
    """A ToolCall from a decoded object inside ``<tool_call>`` (malformed if it is not one)."""
    obj = _unwrap(obj)
    if not isinstance(obj, dict):
        kind = type(obj).__name__
        return ToolCall(new_ulid(), "", {}, malformed=f"tool call is a JSON {kind}, not an object")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolCall(new_ulid(), "", {}, malformed="tool call has no string 'name'")
    arguments, problem = _arguments(obj)
    return ToolCall(new_ulid(), name.strip(), arguments, malformed=problem)


def _guess_name(body: str, offered: Collection[str]) -> str:
    match = _NAME.search(body)
    if match:
        try:
            name = json.loads(f'"{match.group(1)}"')
        except ValueError:
            name = match.group(1)
        return str(name).strip()
    present = [n for n in offered if n and n in body]
    return present[0] if len(present) == 1 else ""


def _calls_from_tag_body(body: str, offered: Collection[str]) -> tuple[list[ToolCall], str]:
    """The calls in one ``<tool_call>`` block, and any prose left after them."""
    body = _strip_fence(body)
    if not body:
        return [ToolCall(new_ulid(), "", {}, malformed="empty <tool_call> block")], ""
    values, error = _decode_all(body)
    if error and not values:
        reason = f"{error} in <tool_call> block"
        return [ToolCall(new_ulid(), _guess_name(body, offered), {}, malformed=reason)], ""
    calls = [_call_from_object(v) for v in values]
    if not error:
        return calls, ""
    # Valid calls followed by prose: keep the calls, give the prose back to the text.
    _, tail = _split_after_values(body, len(values))
    return calls, tail


def _split_after_values(body: str, count: int) -> tuple[int, str]:
    pos = 0
    for _ in range(count):
        while pos < len(body) and body[pos] in " \t\r\n,;":
            pos += 1
        _, pos = _DECODER.raw_decode(body, pos)
    return pos, body[pos:].strip()


def _looks_like_call(obj: Any, offered: Collection[str]) -> bool:
    obj = _unwrap(obj)
    if not isinstance(obj, dict):
        return False
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return False
    return any(key in obj for key in _ARG_KEYS) or name in offered


def _as_calls(value: Any, offered: Collection[str]) -> list[ToolCall] | None:
    """The calls a bare/fenced JSON value stands for, or ``None`` if it is just text."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(_looks_like_call(item, offered) for item in items):
        return None
    return [_call_from_object(item) for item in items]


def _take_fenced(text: str, offered: Collection[str]) -> tuple[str, list[ToolCall]]:
    calls: list[ToolCall] = []

    def replace(match: re.Match[str]) -> str:
        values, error = _decode_all(match.group(1))
        if error or len(values) != 1:
            return match.group(0)
        found = _as_calls(values[0], offered)
        if found is None:
            return match.group(0)
        calls.extend(found)
        return ""

    return _FENCE.sub(replace, text), calls


def _take_bare(text: str, offered: Collection[str]) -> tuple[str, list[ToolCall]]:
    """Lift call objects that start a line and fill the rest of it (or the whole reply)."""
    calls: list[ToolCall] = []
    kept: list[str] = []
    pos = 0
    for match in _LINE_JSON.finditer(text):
        start = match.end() - 1
        if start < pos:
            continue
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        newline = text.find("\n", end)
        line_end = len(text) if newline < 0 else newline
        if text[end:line_end].strip():
            continue
        found = _as_calls(value, offered)
        if found is None:
            continue
        kept.append(text[pos:start])
        calls.extend(found)
        pos = end
    kept.append(text[pos:])
    return "".join(kept), calls


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def split_reasoning(text: str) -> tuple[str, str]:
    """Split ``<think>…</think>`` blocks out of ``text``: return ``(text, reasoning)``.

    An unclosed ``<think>`` runs to the end of the output. Never raises.
    """
    parts: list[str] = []

    def take(match: re.Match[str]) -> str:
        parts.append(match.group(1).strip())
        return ""

    rest = _THINK.sub(take, text)
    rest = rest.replace("</think>", "")
    return rest.strip(), "\n\n".join(p for p in parts if p)


def parse_tool_calls(
    text: str, offered: Collection[str] = ()
) -> tuple[str, tuple[ToolCall, ...]]:
    """Split a model's output into answer text and the tool calls it asked for.

    Args:
        text: the raw output of the model.
        offered: names of the tools offered this turn; used to tell a bare
            call from a JSON answer and to recover names from broken calls.
            A call to a name outside it is still returned.

    Returns:
        The text with every tool-call block removed, and the calls in order
        of appearance (tagged calls first, then fenced, then bare). Never raises.
    """
    if not isinstance(text, str):
        return "", ()
    calls: list[ToolCall] = []
    if _OPEN in text:
        def take(match: re.Match[str]) -> str:
            found, leftover = _calls_from_tag_body(match.group(1), offered)
            calls.extend(found)
            return f"\n{leftover}\n" if leftover else ""

        text = _TAG_BLOCK.sub(take, text)
    text = text.replace(_CLOSE, "")
    text, fenced = _take_fenced(text, offered)
    calls.extend(fenced)
    text, bare = _take_bare(text, offered)
    calls.extend(bare)
    return _tidy(text), tuple(calls)
