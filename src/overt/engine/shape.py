"""A model's response checked for the shape the engine relies on.

A :class:`~overt.types.ModelResponse` is a plain dataclass: nothing stops a
model adapter (a plugin's, or a provider's answer copied field by field) from
putting ``None`` where text goes, a dict where a :class:`~overt.types.ToolCall`
goes, or an object the ledger cannot encode in ``info``. The engine checks once,
as the model's answer arrives, so such a response is a model failure on the
record (the turn ends with ``model_error``) instead of an exception that escapes
the turn and leaves it without its ``turn.completed``.

What a call holds beyond its id and name (its arguments) is not checked here: a
call's arguments the tool cannot take are answered to the model as that call's
error (see :mod:`overt.engine.limits` and the tools' own validation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from overt.types import ModelResponse, ToolCall, Usage


def well_formed(response: Any) -> ModelResponse:
    """``response`` if it has the shape of a :class:`ModelResponse` (tool calls given as
    a list are taken as a tuple).

    Raises:
        TypeError: it does not; the message names the first field that is wrong.
    """
    if not isinstance(response, ModelResponse):
        raise TypeError(f"the model returned a {type(response).__name__}, not a ModelResponse")
    _expect(response.text, str, "text")
    for name in ("model", "stop_reason", "reasoning"):  # None: the engine's defaults
        _expect(getattr(response, name), (str, type(None)), name)
    calls = response.tool_calls
    _expect(calls, (tuple, list), "tool_calls")
    for n, call in enumerate(calls):
        _expect(call, ToolCall, f"tool_calls[{n}]")
        _expect(call.name, str, f"tool_calls[{n}].name")
    usage = response.usage
    _expect(usage, Usage, "usage")
    for name in ("input_tokens", "output_tokens", "cost_usd"):
        value = getattr(usage, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise TypeError(f"the model's usage.{name} is {value!r}, not a number >= 0")
    _expect(response.info, Mapping, "info")
    try:  # recorded with the inference: what the ledger cannot encode is refused here
        json.dumps(response.info, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the model's info cannot be recorded: {exc}") from None
    return replace(response, tool_calls=tuple(calls)) if isinstance(calls, list) else response


def _expect(value: object, kind: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"the model's {name} is a {type(value).__name__}")
