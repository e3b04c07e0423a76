"""AnswerFilter: only text that stays in the recorded answer is streamed, never markup."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overt.models.stream_text import AnswerFilter, visible
from overt.models.toolcall_parse import parse_tool_calls, split_reasoning

CALL = '{"name": "get_usage", "arguments": {"period": "today"}}'
FRAGMENTS = ["Hello", " ", "\n", "\n\n\n", "<think>", "</think>", "<tool_call>",
             "</tool_call>", CALL, "```json\n", "```", "`", "[1]", "{", "東京", "  ", "x",
             "<to", "<"]


def streamed(raw: str) -> str:
    """Feed ``raw`` a character at a time; what the filter sent."""
    pieces: list[str] = []
    answer = AnswerFilter(pieces.append)
    for char in raw:
        answer.feed(char)
    return "".join(pieces)


def recorded(raw: str) -> tuple[str, int]:
    """The answer text a model adapter records for ``raw``, and how many calls it held."""
    text, _ = split_reasoning(raw)
    text, calls = parse_tool_calls(text, ["get_usage"])
    return text, len(calls)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join))
def test_what_is_streamed_begins_the_answer_and_never_holds_markup(raw: str) -> None:
    sent = streamed(raw)
    text, _ = recorded(raw)
    assert text.startswith(sent)
    for mark in ("<tool_call>", "</tool_call>", "<think>", "</think>", "```"):
        assert mark not in sent


def test_a_plain_answer_streams_whole_tidied_as_recorded() -> None:
    raw = "\n  The burn is 735 tokens.\n\n\n\nSpent on 3 turns.  \n"
    assert streamed(raw) == recorded(raw)[0] == "The burn is 735 tokens.\n\nSpent on 3 turns."


def test_a_bare_call_after_prose_is_held_from_its_line() -> None:
    assert streamed(f"Checking usage.\n{CALL}") == "Checking usage."
    assert streamed(f"Checking.<tool_call>\n{CALL}\n</tool_call>") == "Checking."


def test_thinking_is_skipped_and_the_answer_after_it_streams() -> None:
    assert streamed("<think>they want the burn</think>It is 735 tokens.") == \
        "It is 735 tokens."
    assert visible("<think>still thinking") == ""
