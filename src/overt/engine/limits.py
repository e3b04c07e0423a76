"""Limits on the tool arguments a model (or a direct caller) may send, and on the
tool results it reads.

Arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH` levels, or larger than
:data:`MAX_ARGUMENT_CHARS` characters of strings and keys, are refused before
anything encodes, records or dispatches them: the call is answered with a
``malformed tool call`` error the model can read, and the turn goes on and
closes as usual. The walk is iterative, so no depth raises ``RecursionError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from overt.types import ModelResponse, ToolCall

MAX_ARGUMENT_DEPTH = 64
MAX_ARGUMENT_CHARS = 1_000_000


def argument_problem(arguments: Any) -> str | None:
    """Why ``arguments`` are over a limit, or ``None`` when they are within both."""
    chars = 0
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: list[Any] = []
            for key, child in value.items():
                chars += len(key) if isinstance(key, str) else 8
                children.append(child)
        elif isinstance(value, (list, tuple, set, frozenset)):
            children = list(value)
        else:
            chars += len(value) if isinstance(value, (str, bytes)) else 8
            children = []
        if children and depth >= MAX_ARGUMENT_DEPTH:
            return f"arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels"
        if chars > MAX_ARGUMENT_CHARS:
            return f"arguments larger than {MAX_ARGUMENT_CHARS} characters"
        stack.extend((child, depth + 1) for child in children)
    return None


def bounded_result(text: str, cap: int | None) -> str:
    """``text``, or its first ``cap`` characters and a line saying it was cut (the
    model then knows it holds part of the result, not all of it)."""
    if cap is None or len(text) <= cap:
        return text
    return (f"{text[:cap]}\n[overt: the result was cut here, after {cap:,} of its "
            f"{len(text):,} characters]")


def bounded_call(call: ToolCall) -> ToolCall:
    """``call``, or a malformed call with no arguments if its arguments are over a limit."""
    if call.malformed is not None:
        return call
    problem = argument_problem(call.arguments)
    if problem is None:
        return call
    return replace(call, arguments={}, malformed=problem)


def bounded(response: ModelResponse) -> ModelResponse:
    """``response`` with each call over a limit made malformed (the rest unchanged)."""
    if not response.tool_calls:
        return response
    calls = tuple(bounded_call(c) for c in response.tool_calls)
    if all(a is b for a, b in zip(calls, response.tool_calls, strict=True)):
        return response
    return replace(response, tool_calls=calls)
