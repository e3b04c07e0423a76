"""The Qwen2.5 chat format, in Python: prompt rendering and the tool-call schema.

Pure functions, no llama.cpp: :mod:`overt.models.local` decodes with them, and
tests check them without weights.

:func:`render_chatml` writes exactly what the GGUF's own chat template (the
Qwen2.5 Jinja template in ``tokenizer.chat_template``) renders, so prompts do
not depend on a Jinja install or on llama-cpp's template handling:

- a system turn (the first system message, else Qwen's default line), with a
  ``# Tools`` section listing each tool as
  ``{"type": "function", "function": {...}}`` inside ``<tools></tools>``;
- assistant tool calls as ``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>``;
- consecutive tool results as ``<tool_response>`` blocks of one user turn.

:func:`answer_messages` is the other rendering of a tool round, the one the
0.5B model answers from reliably (see :mod:`overt.models.local` for why).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from overt.models.result_text import brief
from overt.types import Message, ToolCall, ToolSpec

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
_TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
ANSWER_PROMPT = (
    "My question: {question}\n\nHere is what the tools returned:\n\n{results}\n\n"
    "Answer my question now, in one or two sentences, in my language, using only these "
    "results and giving the values as they are, with no other numbers."
)


def _tool_json(spec: ToolSpec) -> str:
    return json.dumps({"type": "function", "function": {
        "name": spec.name, "description": spec.description,
        "parameters": dict(spec.input_schema)}}, ensure_ascii=False)


def _call_json(call: ToolCall) -> str:
    args = json.dumps(dict(call.arguments), ensure_ascii=False)
    return f"{{\"name\": {json.dumps(call.name, ensure_ascii=False)}, \"arguments\": {args}}}"


Segment = tuple[str, bool]
"""A piece of prompt and whether it is template markup (``True``) or content (``False``).

Markup is tokenized with special tokens parsed; content is not, so a message or
tool result holding ``<|im_start|>`` cannot open a turn of its own.
"""


def render_segments(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[Segment]:
    """The prompt of :func:`render_chatml`, split into markup and content segments."""
    out: list[Segment] = []

    def markup(text: str) -> None:
        out.append((text, True))

    def content(text: str) -> None:
        if text:
            out.append((text, False))

    rest = list(messages)
    system = DEFAULT_SYSTEM
    if rest and rest[0].role == "system":
        system = rest.pop(0).content
    markup("<|im_start|>system\n")
    content(system)
    if tools:
        markup(_TOOLS_HEADER)
        content("".join("\n" + _tool_json(t) for t in tools))
        markup(_TOOLS_FOOTER)
    markup("<|im_end|>\n")
    for i, m in enumerate(rest):
        if m.role == "tool":
            if i == 0 or rest[i - 1].role != "tool":
                markup("<|im_start|>user")
            markup("\n<tool_response>\n")
            content(m.content)
            markup("\n</tool_response>")
            if i == len(rest) - 1 or rest[i + 1].role != "tool":
                markup("<|im_end|>\n")
        elif m.role == "assistant" and m.tool_calls:
            markup("<|im_start|>assistant")
            if m.content:
                markup("\n")
                content(m.content)
            for call in m.tool_calls:
                markup("\n<tool_call>\n")
                content(_call_json(call))
                markup("\n</tool_call>")
            markup("<|im_end|>\n")
        else:
            markup(f"<|im_start|>{m.role}\n")
            content(m.content)
            markup("<|im_end|>\n")
    markup("<|im_start|>assistant\n")
    return out


def render_chatml(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """The prompt the Qwen2.5 chat template renders, ending with the generation prompt.

    ``tools`` empty renders no ``# Tools`` section (the template's branch
    without tools).
    """
    return "".join(text for text, _ in render_segments(messages, tools))


def _last_user(messages: Sequence[Message]) -> int:
    return max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)


def has_tool_results(messages: Sequence[Message]) -> bool:
    """Whether tool results follow the last user message (the turn is past its tool round)."""
    return any(m.role == "tool" for m in messages[_last_user(messages) + 1:])


def answer_messages(messages: Sequence[Message]) -> list[Message]:
    """Fold the tool round(s) of the current turn into one user message.

    Messages before the last user message stay as they are. The assistant's
    tool calls are dropped, and the tool results become one user message,
    ``name returned:\\n<result>`` each (``name (error) returned`` for an
    error result), after the question; a JSON result is given as short labelled
    lines (:func:`overt.models.result_text.brief`): fewer tokens, and the 0.5B
    model read token counts for cost in the JSON.
    """
    last = _last_user(messages)
    if last < 0:
        return list(messages)
    results = []
    question = messages[last].content or ""
    for m in messages[last + 1:]:
        if m.role == "tool":
            status = " (error)" if m.is_error else ""
            results.append(f"{m.name or 'tool'}{status} returned:\n"
                           f"{brief(m.content, question)}")
    text = ANSWER_PROMPT.format(results="\n\n".join(results), question=question)
    return [*messages[:last], Message("user", text)]


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    return dict(schema) if schema.get("type") == "object" else {"type": "object"}


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """JSON schema of one call: ``{"name": <an offered name>, "arguments": <its input schema>}``.

    One variant per tool (``oneOf``), so the arguments are checked against the
    schema of the tool named; ``name`` comes first, as the model writes it.
    """
    variants = [{
        "type": "object",
        "properties": {"name": {"const": t.name}, "arguments": _object_schema(t.input_schema)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    } for t in tools]
    return variants[0] if len(variants) == 1 else {"oneOf": variants}


def loose_call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The fallback when a tool's schema is beyond llama.cpp's converter: any object arguments."""
    return {
        "type": "object",
        "properties": {"name": {"enum": [t.name for t in tools]}, "arguments": {"type": "object"}},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
