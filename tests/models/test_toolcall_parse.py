from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overt.models.toolcall_parse import parse_tool_calls, split_reasoning

OFFERED = ("get_usage", "get_operational_state")


def test_a_qwen_tagged_call_becomes_a_tool_call_and_leaves_the_text() -> None:
    raw = ('Let me check.\n<tool_call>\n{"name": "get_usage", "arguments": {"days": 1}}\n'
           '</tool_call>')
    text, calls = parse_tool_calls(raw, OFFERED)
    assert text == "Let me check."
    assert len(calls) == 1
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {"days": 1}
    assert calls[0].malformed is None
    assert len(calls[0].id) == 26


def test_several_tagged_calls_are_returned_in_order() -> None:
    raw = (
        '<tool_call>{"name": "get_usage", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "get_operational_state", "arguments": {}}</tool_call>'
    )
    text, calls = parse_tool_calls(raw, OFFERED)
    assert text == ""
    assert [c.name for c in calls] == ["get_usage", "get_operational_state"]
    assert calls[0].id != calls[1].id


def test_an_unclosed_tag_at_end_of_output_still_yields_the_call() -> None:
    raw = '<tool_call>\n{"name": "get_usage", "arguments": {"days": 7}}'
    text, calls = parse_tool_calls(raw, OFFERED)
    assert text == ""
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {"days": 7}


def test_a_tag_opened_before_the_previous_one_closed_splits_into_two_calls() -> None:
    raw = ('<tool_call>{"name": "get_usage", "arguments": {}}\n'
           '<tool_call>{"name": "get_operational_state", "arguments": {}}</tool_call>')
    _, calls = parse_tool_calls(raw, OFFERED)
    assert [c.name for c in calls] == ["get_usage", "get_operational_state"]


def test_two_objects_in_one_tag_are_two_calls() -> None:
    raw = ('<tool_call>\n{"name": "get_usage", "arguments": {}}\n'
           '{"name": "get_operational_state", "arguments": {}}\n</tool_call>')
    _, calls = parse_tool_calls(raw, OFFERED)
    assert [c.name for c in calls] == ["get_usage", "get_operational_state"]
    assert all(c.malformed is None for c in calls)


def test_broken_json_in_a_tag_is_a_malformed_call_with_the_name_recovered() -> None:
    raw = '<tool_call>{"name": "get_usage", "arguments": {"days": }</tool_call>'
    text, calls = parse_tool_calls(raw, OFFERED)
    assert text == ""
    assert len(calls) == 1
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {}
    assert calls[0].malformed is not None
    assert "invalid JSON" in calls[0].malformed


def test_a_call_truncated_at_end_of_output_is_malformed_not_guessed() -> None:
    _, calls = parse_tool_calls('<tool_call>{"name": "get_usage", "arguments": {"days": 7', OFFERED)
    assert calls[0].malformed is not None
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {}


def test_broken_json_naming_no_tool_is_malformed_with_an_empty_name() -> None:
    _, calls = parse_tool_calls("<tool_call>call something please</tool_call>", OFFERED)
    assert calls[0].name == ""
    assert calls[0].malformed


def test_an_empty_tag_is_a_malformed_call() -> None:
    _, calls = parse_tool_calls("<tool_call></tool_call>", OFFERED)
    assert calls[0].malformed == "empty <tool_call> block"


def test_a_tagged_object_without_a_name_is_malformed() -> None:
    _, calls = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>', OFFERED)
    assert calls[0].malformed == "tool call has no string 'name'"


def test_prose_after_a_valid_tagged_call_is_kept_as_text() -> None:
    raw = '<tool_call>{"name": "get_usage", "arguments": {}} and then I will answer</tool_call>'
    text, calls = parse_tool_calls(raw, OFFERED)
    assert calls[0].name == "get_usage"
    assert calls[0].malformed is None
    assert text == "and then I will answer"


def test_a_call_to_a_tool_that_is_not_offered_is_still_returned() -> None:
    raw = '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>'
    _, calls = parse_tool_calls(raw, OFFERED)
    assert calls[0].name == "rm_rf"
    assert calls[0].arguments == {"path": "/"}
    assert calls[0].malformed is None


def test_bare_json_as_the_whole_reply_is_a_call() -> None:
    text, calls = parse_tool_calls(' {"name": "get_usage", "arguments": {"days": 1}} \n', OFFERED)
    assert text == ""
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {"days": 1}


def test_bare_json_on_its_own_line_after_prose_is_a_call() -> None:
    raw = 'I will look that up.\n{"name": "get_operational_state", "arguments": {}}'
    text, calls = parse_tool_calls(raw, OFFERED)
    assert text == "I will look that up."
    assert calls[0].name == "get_operational_state"


def test_a_bare_list_of_calls_is_several_calls() -> None:
    raw = json.dumps([{"name": "get_usage", "arguments": {}},
                      {"name": "get_operational_state", "arguments": {}}])
    _, calls = parse_tool_calls(raw, OFFERED)
    assert [c.name for c in calls] == ["get_usage", "get_operational_state"]


def test_fenced_json_is_a_call_and_the_fence_is_removed() -> None:
    raw = 'Checking:\n```json\n{"name": "get_usage", "arguments": {"days": 3}}\n```\nDone.'
    text, calls = parse_tool_calls(raw, OFFERED)
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {"days": 3}
    assert "```" not in text
    assert text.startswith("Checking:")
    assert text.endswith("Done.")


def test_parameters_is_read_as_arguments() -> None:
    _, calls = parse_tool_calls('{"name": "get_usage", "parameters": {"days": 2}}', OFFERED)
    assert calls[0].arguments == {"days": 2}


def test_arguments_given_as_a_json_string_are_decoded() -> None:
    raw = '<tool_call>{"name": "get_usage", "arguments": "{\\"days\\": 5}"}</tool_call>'
    _, calls = parse_tool_calls(raw, OFFERED)
    assert calls[0].arguments == {"days": 5}
    assert calls[0].malformed is None


def test_arguments_that_are_not_an_object_make_the_call_malformed() -> None:
    _, calls = parse_tool_calls('<tool_call>{"name": "get_usage", "arguments": [1]}</tool_call>')
    assert calls[0].name == "get_usage"
    assert calls[0].malformed == "arguments must be a JSON object, got list"


def test_an_openai_style_function_wrapper_is_unwrapped() -> None:
    raw = json.dumps({"type": "function",
                      "function": {"name": "get_usage", "arguments": "{\"days\": 1}"}})
    _, calls = parse_tool_calls(raw, OFFERED)
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {"days": 1}


def test_json_without_a_name_stays_text() -> None:
    raw = '{"turns": 3, "tokens": 1200}'
    assert parse_tool_calls(raw, OFFERED) == (raw, ())


def test_json_whose_name_is_not_a_string_stays_text() -> None:
    raw = '{"name": 42, "arguments": {}}'
    assert parse_tool_calls(raw, OFFERED) == (raw, ())


def test_a_package_json_answer_is_not_mistaken_for_a_call() -> None:
    raw = 'Here it is:\n```json\n{"name": "my-app", "version": "1.0.0"}\n```'
    assert parse_tool_calls(raw, OFFERED) == (raw, ())


def test_a_bare_name_only_object_is_a_call_when_it_names_an_offered_tool() -> None:
    _, calls = parse_tool_calls('{"name": "get_usage"}', OFFERED)
    assert calls[0].name == "get_usage"
    assert calls[0].arguments == {}


def test_nan_inside_a_call_is_not_accepted_as_json() -> None:
    _, calls = parse_tool_calls('<tool_call>{"name": "x", "arguments": {"a": NaN}}</tool_call>')
    assert calls[0].malformed is not None


def test_plain_prose_has_no_calls() -> None:
    assert parse_tool_calls("You ran 3 turns today.", OFFERED) == ("You ran 3 turns today.", ())


def test_a_stray_closing_tag_is_removed_from_the_text() -> None:
    assert parse_tool_calls("Done.</tool_call>", OFFERED) == ("Done.", ())


def test_think_blocks_are_split_into_reasoning() -> None:
    assert split_reasoning("<think>count first</think>\nThree turns.") == (
        "Three turns.", "count first")


def test_an_unclosed_think_block_is_all_reasoning() -> None:
    assert split_reasoning("<think>still thinking") == ("", "still thinking")


_fragments = st.sampled_from([
    "<tool_call>", "</tool_call>", "```json\n", "```", "\n", "{", "}", "[", "]", '"name"', ":",
    '"get_usage"', '"arguments"', '"parameters"', ",", '"{}"', "{}", "NaN", "null", "1",
    "<think>", "</think>", '"function"', "\\", '"',
])


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_fragments, st.text(max_size=8)), max_size=30).map("".join))
def test_parsing_never_raises_on_any_input(raw: str) -> None:
    text, calls = parse_tool_calls(raw, OFFERED)
    assert isinstance(text, str)
    for call in calls:
        assert isinstance(call.name, str)
        assert isinstance(call.arguments, dict)
        json.dumps(call.arguments, allow_nan=False)
    split_reasoning(raw)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parsing_never_raises_on_arbitrary_text(raw: str) -> None:
    parse_tool_calls(raw)


def test_deeply_nested_json_does_not_raise() -> None:
    raw = "<tool_call>" + "[" * 100_000 + "</tool_call>\n" + "{" * 50_000
    _, calls = parse_tool_calls(raw, OFFERED)
    assert calls[0].malformed is not None
