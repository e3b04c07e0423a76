"""The embedded default model ``local``: Qwen2.5-Coder-0.5B-Instruct through llama.cpp.

DECODING STRATEGY (to be filled in after measuring)
"""

from __future__ import annotations

import json
from collections.abc import Sequence

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
_MAX_CALLS_PER_REPLY = 4


def _tool_json(spec: ToolSpec) -> str:
    return json.dumps({"type": "function", "function": {
        "name": spec.name, "description": spec.description,
        "parameters": dict(spec.input_schema)}}, ensure_ascii=False)


def _call_json(call: ToolCall) -> str:
    args = json.dumps(dict(call.arguments), ensure_ascii=False)
    return f'{{"name": "{call.name}", "arguments": {args}}}'


def render_chatml(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """The prompt the GGUF's own (Qwen2.5) chat template renders, written out in Python.

    Consecutive tool results share one user turn of ``<tool_response>`` blocks;
    an assistant message's tool calls are rendered as ``<tool_call>`` blocks.
    Ends with the generation prompt ``<|im_start|>assistant\\n``.
    """
    out: list[str] = []
    rest = list(messages)
    system = DEFAULT_SYSTEM
    if rest and rest[0].role == "system":
        system = rest.pop(0).content
    if tools:
        body = "".join("\n" + _tool_json(t) for t in tools)
        out.append(f"<|im_start|>system\n{system}{_TOOLS_HEADER}{body}{_TOOLS_FOOTER}<|im_end|>\n")
    else:
        out.append(f"<|im_start|>system\n{system}<|im_end|>\n")
    for i, m in enumerate(rest):
        if m.role == "tool":
            if i == 0 or rest[i - 1].role != "tool":
                out.append("<|im_start|>user")
            out.append(f"\n<tool_response>\n{m.content}\n</tool_response>")
            if i == len(rest) - 1 or rest[i + 1].role != "tool":
                out.append("<|im_end|>\n")
        elif m.role == "assistant" and m.tool_calls:
            out.append("<|im_start|>assistant")
            if m.content:
                out.append("\n" + m.content)
            for call in m.tool_calls:
                out.append(f"\n<tool_call>\n{_call_json(call)}\n</tool_call>")
            out.append("<|im_end|>\n")
        else:
            out.append(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)
