"""JSON that someone hands overt (a proof file, eval cases, a scripted model's
replies, the tokens file), parsed with a limit on how deeply it nests.

Python's parser recurses once per level: a document of a few thousand ``[`` raises
``RecursionError``, and one just under the interpreter's limit parses, then breaks
whatever recursive code reads the value next (canonical JSON, a comparison). Real
input nests a handful of levels: deeper than :data:`MAX_JSON_DEPTH` is refused
before parsing, by a scan that does not recurse.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from overt.errors import UsageError

MAX_JSON_DEPTH = 128
"""How deeply arrays and objects may nest in JSON overt is given (a proof nests 3)."""

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class JsonTooDeep(UsageError, ValueError):
    """JSON nested deeper than the limit. Also a ``ValueError``, as the parser's own
    errors are, so a caller that reports malformed JSON reports this too."""


def depth(text: str | bytes) -> int:
    """How deeply the arrays and objects of the JSON ``text`` nest (brackets inside
    strings do not count); text that is not JSON gets a number all the same."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    brackets = _BRACKETS.findall(_STRINGS.sub("", text))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


def loads(text: str | bytes, *, what: str = "the JSON", max_depth: int = MAX_JSON_DEPTH,
          **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``, unless it nests deeper than ``max_depth``.

    Raises:
        JsonTooDeep: it nests deeper than ``max_depth`` (``what`` names it).
        ValueError: it is not JSON (:class:`json.JSONDecodeError`).
    """
    nested = depth(text)
    if nested > max_depth:
        raise JsonTooDeep(f"{what} nests {nested} levels deep, deeper than the "
                          f"{max_depth} overt reads")
    return json.loads(text, **kwargs)
