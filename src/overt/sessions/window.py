"""Fitting a request into a model's context window.

The system prompt, the tool schemas and the turn in progress always go; the
session's earlier turns follow, newest first and whole, while they fit. Once the
window is full, the oldest turn sent is the *anchor* of the oldest fifth of what
fits: its turn of the highest :func:`anchor_level` (a level as rare as it is high,
chosen by the turn's id). As the session grows, the anchor stays while the window
has room for the turns after it, and a later turn becomes the anchor only when the
window moves past it or a turn of a higher level enters the oldest fifth: the
window moves in steps of about a tenth of itself, whatever its size, rather than
a turn at a time. The requests between two steps begin alike, so a model's prompt
cache still holds them and the request's stored parts are shared with the last
one's (:mod:`overt.engine.request_body`), where a window that moved a turn at a
time would make every request new from its first earlier turn on, the whole
window stored again with each. The window holds about nine tenths of what would
fit, at least four fifths. What is left out is reported (the newest turn left out,
every older one left out too, and the tokens of those within a window's worth) so
the engine records it on the inference entry.

Only the newest turns are weighed: those that hold one window's worth of tokens
(older ones could not be sent), so fitting a long conversation costs what fitting
a short one does.

Token counts come from the model when it can count (``count_tokens``: the embedded
model tokenizes with its own vocabulary), else from a deliberately high estimate
(:func:`estimate_tokens`), so an estimate errs towards leaving a turn out, never
towards a request the model rejects for length.
"""

from __future__ import annotations

import json
import zlib
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from overt.types import Message, ToolSpec


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    """One answered turn of a session, as the model is shown it again."""

    turn_id: str
    messages: tuple[Message, ...]
    tokens: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    """Its size by each token counter that weighed it (by the counter's hash: a dict
    of ints is not one the garbage collector walks), once weighed
    (:func:`turn_tokens`): a turn held by a
    :class:`~overt.sessions.book.HistoryReader` is counted once, not once per request
    it is in."""


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


WINDOW_ATTRIBUTES = ("context_window", "n_ctx", "count_tokens", "max_tokens")
"""What a history window reads of its model (its size, its token counter, the most it
writes): a stand-in for a model (replay's) takes these from the model it stands for."""


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
    return sum(_tool_tokens(s, count) for s in specs)


_TOOL_TOKENS: dict[tuple[int, Counter], tuple[ToolSpec, int]] = {}
"""Each tool's tokens by counter, once counted: the registry hands every turn the
same specs. Keyed by the spec's id; the spec is kept beside its count, so its id
is not reused while the entry lives."""


def _tool_tokens(spec: ToolSpec, count: Counter) -> int:
    known = _TOOL_TOKENS.get((id(spec), count))
    if known is not None and known[0] is spec:
        return known[1]
    if len(_TOOL_TOKENS) > 4096:
        _TOOL_TOKENS.clear()
    size = count(json.dumps({"name": spec.name, "description": spec.description,
                             "parameters": dict(spec.input_schema)}, ensure_ascii=False))
    _TOOL_TOKENS[(id(spec), count)] = (spec, size)
    return size


def turn_tokens(turn: HistoryTurn, count: Counter) -> int:
    """The tokens ``turn``'s messages take, counted once per counter."""
    size = turn.tokens.get(hash(count))
    if size is None:
        size = turn.tokens[hash(count)] = sum(message_tokens(m, count) for m in turn.messages)
    return size


def anchor_level(turn_id: str) -> int:
    """How fit turn ``turn_id`` is to be the oldest of a full window: the trailing
    zero bits of a checksum of its id, so one turn in two has level 1 or more, one
    in four 2 or more, and so on (the same on every run, in every process, and under
    replay)."""
    check = zlib.crc32(turn_id.encode())
    return 32 if check == 0 else (check & -check).bit_length() - 1


class EarlierTurns(Sequence[HistoryTurn]):
    """A session's earlier turns, oldest first, with what fitting them into a window
    reads made as each turn is added, not again at every request: their token counts
    as running totals (by each counter asked for), their :func:`anchor_level`, and
    their messages in one list. A reader that keeps a conversation keeps one of these
    (:class:`overt.sessions.book.HistoryReader`), so a turn of a long conversation
    fits its window with a search of the totals, not a walk over its turns."""

    __slots__ = ("_ends", "_levels", "_messages", "_totals", "_turns")

    def __init__(self, turns: Iterable[HistoryTurn] = ()) -> None:
        self._turns: list[HistoryTurn] = []
        self._levels: list[int] = []
        self._messages: list[Message] = []
        self._ends: list[int] = [0]  # where each turn's messages end in _messages
        self._totals: dict[Counter, list[int]] = {}
        for turn in turns:
            self.append(turn)

    def append(self, turn: HistoryTurn) -> None:
        """``turn``, newer than every turn held."""
        self._turns.append(turn)
        self._levels.append(anchor_level(turn.turn_id))
        self._messages.extend(turn.messages)
        self._ends.append(len(self._messages))
        for count, totals in self._totals.items():
            totals.append(totals[-1] + turn_tokens(turn, count))

    def __len__(self) -> int:
        return len(self._turns)

    def __iter__(self) -> Iterator[HistoryTurn]:
        return iter(self._turns)

    @overload
    def __getitem__(self, at: int) -> HistoryTurn: ...

    @overload
    def __getitem__(self, at: slice) -> list[HistoryTurn]: ...

    def __getitem__(self, at: int | slice) -> HistoryTurn | list[HistoryTurn]:
        return self._turns[at]

    def totals(self, count: Counter) -> list[int]:
        """The turns' tokens by ``count``, running: item ``i`` is what the turns before
        turn ``i`` take (``len(self) + 1`` items, the first 0)."""
        totals = self._totals.get(count)
        if totals is None:
            totals = [0]
            for turn in self._turns:
                totals.append(totals[-1] + turn_tokens(turn, count))
            self._totals[count] = totals
        return totals

    def level(self, at: int) -> int:
        """Turn ``at``'s :func:`anchor_level`."""
        return self._levels[at]

    def messages_from(self, at: int) -> list[Message]:
        """The messages of the turns from turn ``at`` on, in order."""
        return self._messages[self._ends[at]:]


@dataclass(frozen=True, slots=True)
class Fitted:
    """What fits: the earlier turns kept (oldest first), those left out, and counts."""

    kept: tuple[HistoryTurn, ...]
    omitted_through: str | None
    """The newest turn left out (every older one was left out too); ``None`` when
    every turn was kept."""
    omitted_tokens: int
    """The tokens of the turns left out among those weighed: the newest turns that hold
    one window's worth of tokens (older ones could not have been sent)."""
    tokens: int
    """The request's tokens with what was kept (the estimate the decision used)."""
    kept_tokens: int = 0
    """The tokens of :attr:`kept`."""


def fit(history: Sequence[HistoryTurn], fixed: Sequence[Message], specs: Sequence[ToolSpec],
        *, window: int | None, reserve: int, count: Counter) -> Fitted:
    """Keep the newest of ``history`` that fit in ``window`` beside ``fixed`` (the system
    prompt and the turn in progress), ``specs`` and ``reserve`` tokens for the answer.

    A turn is kept whole or not at all, and once one is left out every older one is
    too (a conversation with a hole in it misleads more than a shorter one). When
    not all fit, the oldest turn kept is the anchor (module docstring): of the turns
    that fit while the turns from them on fill at least four fifths of the room
    left for them, the oldest of the highest :func:`anchor_level`. Turns older than
    one window's worth of tokens are not weighed: they are not counted in
    :attr:`Fitted.omitted_tokens`. ``history`` given as :class:`EarlierTurns` is
    fitted without a walk over its turns.
    """
    earlier = history if isinstance(history, EarlierTurns) else EarlierTurns(history)
    base = sum(message_tokens(m, count) for m in fixed) + tools_tokens(specs, count)
    totals = earlier.totals(count)
    total = totals[-1]
    if window is None:
        return Fitted(tuple(earlier), None, 0, base + total, total)
    room = window - reserve - base
    cut = min(bisect_left(totals, total - room), len(earlier))  # the newest that fit
    if cut > 0:  # the window is full: begin at the anchor of its oldest fifth, among
        # the turns from which on the kept ones fill at least four fifths of the room
        stop = bisect_right(totals, total * 5 - room * 4, cut, len(earlier),
                            key=lambda t: t * 5)
        if stop > cut:
            cut = max(range(cut, stop), key=earlier.level)  # the oldest of the highest
    used = total - totals[cut]
    if cut == 0:
        return Fitted(tuple(earlier), None, 0, base + used, used)
    # weighed, newest first: the left-out turns while what is weighed (the kept turns'
    # tokens and theirs) is under a window; the oldest weighed is the newest ``at`` with
    # used + totals[cut] - totals[at] >= window, else the first turn
    at = cut if used >= window else max(
        bisect_right(totals, used + totals[cut] - window, 0, cut) - 1, 0)
    return Fitted(tuple(earlier[cut:]), earlier[cut - 1].turn_id, totals[cut] - totals[at],
                  base + used, used)


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
        self.omitted_through: str | None = None  # the newest earlier turn left out
        self.omitted_tokens = 0
        self._at = 0  # where the earlier turns begin in the turn's messages
        self._kept: deque[HistoryTurn] = deque()  # the earlier turns placed, oldest first
        self._placed = 0  # their messages
        self._kept_tokens = 0  # their tokens

    def place(self, messages: list[Message], earlier: Sequence[HistoryTurn], new: Message,
              specs: Sequence[ToolSpec]) -> None:
        """Append to ``messages`` the newest of ``earlier`` that fit beside them and ``new``."""
        held = earlier if isinstance(earlier, EarlierTurns) else EarlierTurns(earlier)
        fitted = fit(held, [*messages, new], specs, window=self.window,
                     reserve=self.reserve, count=self.count)
        self.omitted_through, self.omitted_tokens = fitted.omitted_through, fitted.omitted_tokens
        self._at = len(messages)
        messages.extend(held.messages_from(len(held) - len(fitted.kept)))
        self._kept = deque(fitted.kept)
        self._placed = len(messages) - self._at
        self._kept_tokens = fitted.kept_tokens

    def trim(self, messages: list[Message], specs: Sequence[ToolSpec]) -> str | None:
        """Leave out the oldest earlier turns until a request of ``messages`` fits; why it
        cannot fit even without them (``None`` when it fits)."""
        if self.window is None:
            return None
        own = messages[:self._at] + messages[self._at + self._placed:]
        need = (sum(message_tokens(m, self.count) for m in own) + self._kept_tokens
                + tools_tokens(specs, self.count) + self.reserve)
        while need > self.window and self._kept:
            turn = self._kept.popleft()
            tokens = turn_tokens(turn, self.count)
            del messages[self._at:self._at + len(turn.messages)]
            self._placed -= len(turn.messages)
            self._kept_tokens -= tokens
            self.omitted_through = turn.turn_id
            self.omitted_tokens += tokens
            need -= tokens
        if need <= self.window:
            return None
        return (f"the request needs about {need} tokens (with {self.reserve} kept for the "
                f"answer) and the model's context window is {self.window}")
