"""Fitting a request into a model's context window.

The system prompt, the tool schemas and the turn in progress always go; the
session's earlier turns follow, newest first and whole, while they fit. What is
left out is reported (turn ids and token counts) so the engine records it on the
inference entry.

Token counts come from the model when it can count (``count_tokens``: the embedded
model tokenizes with its own vocabulary), else from a deliberately high estimate
(:func:`estimate_tokens`), so an estimate errs towards leaving a turn out, never
towards a request the model rejects for length.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from overt.sessions.book import HistoryTurn
from overt.types import Message, ToolSpec

MESSAGE_OVERHEAD = 8
"""Tokens a chat template spends around each message (role markers, separators)."""

Counter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """A high estimate of ``text``'s tokens: one per 3 bytes of UTF-8, at least one
    per 2 characters of non-ASCII text (BPE vocabularies spend 3-4 bytes a token on
    English and about a character a token on Japanese)."""
    if not text:
        return 0
    size = len(text.encode("utf-8"))
    wide = size - len(text)
    return max(-(-size // 3), -(-wide // 2))


def counter_for(model: object) -> Counter:
    """The model's own token counter when it has one, else :func:`estimate_tokens`."""
    count = getattr(model, "count_tokens", None)
    return count if callable(count) else estimate_tokens


def window_of(model: object) -> int | None:
    """The model's context window in tokens (``context_window``, or llama.cpp's
    ``n_ctx``), or ``None`` when the model does not say."""
    for attr in ("context_window", "n_ctx"):
        value = getattr(model, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def message_tokens(message: Message, count: Counter) -> int:
    total = MESSAGE_OVERHEAD + count(message.content)
    for call in message.tool_calls:
        total += count(call.name) + count(json.dumps(dict(call.arguments), ensure_ascii=False))
    return total


def tools_tokens(specs: Sequence[ToolSpec], count: Counter) -> int:
    return sum(count(json.dumps({"name": s.name, "description": s.description,
                                 "parameters": dict(s.input_schema)}, ensure_ascii=False))
               for s in specs)


@dataclass(frozen=True, slots=True)
class Fitted:
    """What fits: the earlier turns kept (oldest first), those left out, and counts."""

    kept: tuple[HistoryTurn, ...]
    omitted: tuple[str, ...]
    omitted_tokens: int
    tokens: int
    """The request's tokens with what was kept (the estimate the decision used)."""


def fit(history: Sequence[HistoryTurn], fixed: Sequence[Message], specs: Sequence[ToolSpec],
        *, window: int | None, reserve: int, count: Counter) -> Fitted:
    """Keep the newest of ``history`` that fit in ``window`` beside ``fixed`` (the system
    prompt and the turn in progress), ``specs`` and ``reserve`` tokens for the answer.

    A turn is kept whole or not at all, and once one is left out every older one is
    too (a conversation with a hole in it misleads more than a shorter one).
    """
    base = sum(message_tokens(m, count) for m in fixed) + tools_tokens(specs, count)
    sizes = [sum(message_tokens(m, count) for m in turn.messages) for turn in history]
    if window is None:
        return Fitted(tuple(history), (), 0, base + sum(sizes))
    room = window - reserve - base
    kept = 0
    used = 0
    for size in reversed(sizes):
        if used + size > room:
            break
        used += size
        kept += 1
    cut = len(history) - kept
    return Fitted(tuple(history[cut:]), tuple(t.turn_id for t in history[:cut]),
                  sum(sizes[:cut]), base + used)
