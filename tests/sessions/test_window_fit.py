"""Fitting searches running totals (:class:`overt.sessions.window.EarlierTurns`); what it
keeps and leaves out must be exactly what walking the turns one by one gives, for any
history, window and counter: the oracle below is that walk, written plainly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from overt.sessions.window import (
    EarlierTurns,
    HistoryTurn,
    Message,
    TurnWindow,
    anchor_level,
    estimate_tokens,
    fit,
    message_tokens,
    turn_tokens,
)

SYSTEM = Message("system", "You are overt.")


def walked(history: list[HistoryTurn], window: int, reserve: int) -> tuple[list[str], list[str]]:
    """(kept, omitted) turn ids by walking the turns: the newest that fit, then the
    anchor of the oldest fifth, then the left-out turns within a window's worth."""
    count = estimate_tokens
    room = window - reserve - message_tokens(SYSTEM, count)
    used, cut = 0, len(history)
    for turn in reversed(history):
        size = turn_tokens(turn, count)
        if used + size > room:
            break
        used += size
        cut -= 1
    if cut > 0:
        at, left, level = cut, used, -1
        while left * 5 >= room * 4 and at < len(history):
            mine = anchor_level(history[at].turn_id)
            if mine > level:
                cut, used, level = at, left, mine
            left -= turn_tokens(history[at], count)
            at += 1
    omitted: list[str] = []
    weighed = used
    for at in range(cut - 1, -1, -1):
        if weighed >= window:
            break
        weighed += turn_tokens(history[at], count)
        omitted.append(history[at].turn_id)
    return [t.turn_id for t in history[cut:]], omitted[::-1]


def turns(sizes: list[int]) -> list[HistoryTurn]:
    return [HistoryTurn(f"01T{i:05d}{size}", (Message("user", "q" * size),
                                               Message("assistant", "a" * (size * 2))))
            for i, size in enumerate(sizes)]


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 400), max_size=80), window=st.integers(1, 3000),
       reserve=st.integers(0, 500), held=st.booleans())
def test_fit_keeps_and_leaves_out_what_walking_the_turns_does(
    sizes: list[int], window: int, reserve: int, held: bool
) -> None:
    history = turns(sizes)
    given_as = EarlierTurns(history) if held else history
    fitted = fit(given_as, [SYSTEM], [], window=window, reserve=reserve, count=estimate_tokens)
    kept, omitted = walked(history, window, reserve)
    assert [t.turn_id for t in fitted.kept] == kept
    assert fitted.omitted_through == (history[len(history) - len(kept) - 1].turn_id
                                      if len(kept) < len(history) else None)
    kept_tokens = sum(turn_tokens(t, estimate_tokens) for t in fitted.kept)
    assert fitted.kept_tokens == kept_tokens
    assert fitted.omitted_tokens == sum(turn_tokens(t, estimate_tokens) for t in history
                                        if t.turn_id in set(omitted))
    assert fitted.tokens == message_tokens(SYSTEM, estimate_tokens) + kept_tokens


def test_turns_added_one_at_a_time_fit_as_the_same_turns_given_at_once() -> None:
    """A reader appends each answered turn; its running totals (already made for one
    counter) and its messages grow with it."""
    history = turns([30 * (i % 7) + 5 for i in range(120)])
    grown = EarlierTurns()
    for turn in history[:60]:
        grown.append(turn)
    fit(grown, [SYSTEM], [], window=2000, reserve=100, count=estimate_tokens)  # totals made
    for turn in history[60:]:
        grown.append(turn)
    at_once = fit(history, [SYSTEM], [], window=2000, reserve=100, count=estimate_tokens)
    assert fit(grown, [SYSTEM], [], window=2000, reserve=100, count=estimate_tokens) == at_once
    assert grown.messages_from(100) == [m for t in history[100:] for m in t.messages]


def test_a_turn_window_places_the_kept_turns_messages_after_the_system_prompt() -> None:
    class Model:
        context_window = 2000

    history = turns([40] * 50)
    window = TurnWindow(Model(), 200)
    messages = [SYSTEM]
    new = Message("user", "and now?")
    window.place(messages, EarlierTurns(history), new, [])
    kept = (len(messages) - 1) // 2  # two messages a turn
    assert 0 < kept < len(history)
    assert messages[0] is SYSTEM
    assert messages[1:] == [m for t in history[-kept:] for m in t.messages]
    assert window.omitted_through == history[-kept - 1].turn_id
