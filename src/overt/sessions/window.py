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


class TurnWindow:
    """A turn's hold on its model's window: which of the session's earlier turns sit in
    the turn's messages, and what was left out (recorded on every inference).

    :meth:`place` puts the newest earlier turns that fit after the messages so far;
    :meth:`trim`, before each model call, leaves out the oldest of them again while
    the turn's own messages (tool results) grow past the window.
    """

    def __init__(self, model: object, max_output_tokens: int | None) -> None:
        self.window = window_of(model)
        self.count = counter_for(model)
        own = getattr(model, "max_tokens", None)  # the most the model itself writes
        self.reserve = (max_output_tokens
                        or (own if isinstance(own, int) and own > 0
                            else min(1024, (self.window or 0) // 4)))
        self.omitted: list[str] = []
        self.omitted_tokens = 0
        self._at = 0
        self._spans: list[tuple[str, int, int]] = []  # (turn id, messages, tokens), oldest first

    def place(self, messages: list[Message], earlier: Sequence[HistoryTurn], new: Message,
              specs: Sequence[ToolSpec]) -> None:
        """Append to ``messages`` the newest of ``earlier`` that fit beside them and ``new``."""
        fitted = fit(earlier, [*messages, new], specs, window=self.window,
                     reserve=self.reserve, count=self.count)
        self.omitted, self.omitted_tokens = list(fitted.omitted), fitted.omitted_tokens
        self._at = len(messages)
        for turn in fitted.kept:
            messages.extend(turn.messages)
            self._spans.append((turn.turn_id, len(turn.messages),
                                sum(message_tokens(m, self.count) for m in turn.messages)))

    def trim(self, messages: list[Message], specs: Sequence[ToolSpec]) -> str | None:
        """Leave out the oldest earlier turns until a request of ``messages`` fits; why it
        cannot fit even without them (``None`` when it fits)."""
        if self.window is None:
            return None
        need = (sum(message_tokens(m, self.count) for m in messages)
                + tools_tokens(specs, self.count) + self.reserve)
        while need > self.window and self._spans:
            turn_id, size, tokens = self._spans.pop(0)
            del messages[self._at:self._at + size]
            self.omitted.append(turn_id)
            self.omitted_tokens += tokens
            need -= tokens
        if need <= self.window:
            return None
        return (f"the request needs about {need} tokens (with {self.reserve} kept for the "
                f"answer) and the model's context window is {self.window}")
