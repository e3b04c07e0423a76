from __future__ import annotations

from typing import Any

import pytest

from overt.errors import UsageError
from overt.tools import shapes
from overt.tools.builtin import get_usage
from overt.types import ToolSpec

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANTHROPIC = {"name": "weather", "description": "The weather in a city.", "input_schema": SCHEMA}
OPENAI = {"type": "function", "function": {
    "name": "weather", "description": "The weather in a city.", "parameters": SCHEMA}}


def test_an_anthropic_descriptor_converts_to_openai_and_back_unchanged() -> None:
    assert shapes.anthropic_to_openai(ANTHROPIC) == OPENAI
    assert shapes.openai_to_anthropic(shapes.anthropic_to_openai(ANTHROPIC)) == ANTHROPIC


def test_an_openai_descriptor_converts_to_anthropic_and_back_unchanged() -> None:
    assert shapes.openai_to_anthropic(OPENAI) == ANTHROPIC
    assert shapes.anthropic_to_openai(shapes.openai_to_anthropic(OPENAI)) == OPENAI


def test_a_spec_round_trips_through_both_shapes() -> None:
    from dataclasses import replace

    spec = get_usage.spec
    assert spec.read_only  # the gate's to know, not the model's: not in either shape
    assert "read_only" not in str(shapes.to_anthropic(spec) | shapes.to_openai(spec))
    told = replace(spec, read_only=False)
    assert shapes.from_anthropic(shapes.to_anthropic(spec)) == told
    assert shapes.from_openai(shapes.to_openai(spec)) == told


def test_a_descriptor_may_say_its_tool_is_read_only() -> None:
    assert shapes.to_spec({**ANTHROPIC, "read_only": True}).read_only
    assert shapes.to_spec({**OPENAI, "read_only": True}).read_only
    assert not shapes.to_spec(ANTHROPIC).read_only
    with pytest.raises(UsageError, match="read_only must be true or false"):
        shapes.to_spec({**ANTHROPIC, "read_only": "yes"})


def test_the_openai_shape_may_say_read_only_inside_its_function_object() -> None:
    inside = {"type": "function", "function": {**OPENAI["function"], "read_only": True}}
    assert shapes.to_spec(inside).read_only
    hinted = {"type": "function", "function": {**OPENAI["function"],
                                               "annotations": {"readOnlyHint": True}}}
    assert shapes.to_spec(hinted).read_only
    assert shapes.to_spec({**ANTHROPIC, "annotations": {"readOnlyHint": True}}).read_only
    assert not shapes.to_spec({**OPENAI, "annotations": {"readOnlyHint": False}}).read_only
    assert not shapes.to_spec({**ANTHROPIC, "annotations": {"title": "Weather"}}).read_only


@pytest.mark.parametrize(("descriptor", "message"), [
    ({"type": "function", "function": {**OPENAI["function"], "read_only": 1}},
     "function.read_only must be true or false"),
    ({**ANTHROPIC, "annotations": {"readOnlyHint": "true"}},
     "annotations.readOnlyHint must be true or false"),
    ({**ANTHROPIC, "annotations": ["readOnlyHint"]}, "annotations must be an object"),
    ({**OPENAI, "read_only": False, "function": {**OPENAI["function"], "read_only": True}},
     "read_only=false, function.read_only=true disagree"),
    ({**ANTHROPIC, "read_only": True, "annotations": {"readOnlyHint": False}},
     "read_only=true, annotations.readOnlyHint=false disagree"),
])
def test_a_read_only_declaration_that_is_malformed_or_contradicts_itself_is_refused(
    descriptor: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        shapes.to_spec(descriptor)


def test_to_spec_tells_the_shapes_apart() -> None:
    expected = ToolSpec("weather", "The weather in a city.", SCHEMA)
    assert shapes.to_spec(ANTHROPIC) == shapes.to_spec(OPENAI) == expected
    assert shapes.to_spec(expected) is expected


def test_an_openai_function_without_parameters_takes_no_arguments() -> None:
    spec = shapes.from_openai({"type": "function", "function": {"name": "ping"}})
    assert spec.input_schema == {"type": "object", "properties": {}} and spec.description == ""


@pytest.mark.parametrize("bad", [
    "weather", {"description": "no name", "input_schema": SCHEMA},
    {"name": "bad name!", "input_schema": SCHEMA}, {"name": "x", "input_schema": "schema"},
    {"name": "x", "input_schema": {"type": "array"}}, {"type": "tool", "function": {"name": "x"}},
    {"type": "function", "function": "x"}, {"name": "x", "description": 3, "input_schema": SCHEMA},
])
def test_a_malformed_descriptor_is_a_usage_error(bad: Any) -> None:
    with pytest.raises(UsageError):
        shapes.to_spec(bad)
