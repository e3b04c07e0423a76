"""What a hook implementation may answer with, beyond plain values.

Each is a decision that carries its reason (a short code for the record, and a
message for the model or the operator), never a bare bool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from overt import json_input
from overt.errors import UsageError

_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")


def _check_code(code: str) -> None:
    if not isinstance(code, str) or not _CODE.match(code):
        raise UsageError(f"invalid reason code {code!r}: a letter, then letters, digits, "
                         "_ . or -, at most 64")


@dataclass(frozen=True, slots=True)
class Block:
    """``pre_tool_call``'s answer that stops a tool call before it runs.

    ``reason_code`` goes on the record (the tool call's ``reason_code`` and the
    ``hook.blocked`` entry); ``message`` is what the model reads, and is kept
    in the content tier only, since it may quote the call's arguments.

    Raises:
        UsageError: ``reason_code`` is not a short plain code.
    """

    reason_code: str = "blocked"
    message: str = ""

    def __post_init__(self) -> None:
        _check_code(self.reason_code)


@dataclass(frozen=True, slots=True)
class Reissue:
    """``post_llm_call_can_reissue``'s answer: make this model call again.

    ``model`` names the model to ask (a registered model's name or a model spec
    such as ``scripted:FILE``); ``None`` asks the same model. ``context`` is
    added to the request as one more user message (for instance the first
    answer, for a stronger model to check). ``reason_code`` goes on the record.

    Raises:
        UsageError: ``reason_code`` is not a short plain code.
    """

    model: str | None = None
    context: str | None = None
    reason_code: str = "reissue"

    def __post_init__(self) -> None:
        _check_code(self.reason_code)


_ENVELOPE_MAX_CHARS = 64 * 1024  # an error message, not a document: larger is a result


def error_envelope(result: Any) -> str | None:
    """The error a provided result reports in the error envelope, else None.

    The envelope is a JSON object whose one key is ``"error"``, holding a non-empty
    string: ``{"result": json.dumps({"error": "kora_tool_dispatch_error: ..."})}``, as
    a tool bridge answers a call it could not dispatch (or the same object as the
    result itself, not yet encoded). Anything else, including an object with an
    ``"error"`` key beside others, is a result like any other.
    """
    if isinstance(result, str):
        text = result.strip()
        if not (text.startswith("{") and text.endswith("}") and '"error"' in text) \
                or len(text) > _ENVELOPE_MAX_CHARS:
            return None
        try:
            result = json_input.loads(text, what="a provided result", max_depth=8)
        except ValueError:  # not JSON (or deeper than an envelope): a plain result
            return None
    if isinstance(result, Mapping) and len(result) == 1:
        error = result.get("error")
        if isinstance(error, str) and error.strip():
            return error
    return None
