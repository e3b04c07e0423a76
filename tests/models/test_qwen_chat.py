from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from overt.models.qwen_chat import (
    answer_messages,
    call_schema,
    has_tool_results,
    loose_call_schema,
    render_chatml,
)
from overt.types import Message, ToolCall, ToolSpec
from tests import needs

TOOLS = (
    ToolSpec("get_operational_state", "How the runtime is doing.",
             {"type": "object", "properties": {}, "additionalProperties": False}),
    ToolSpec("get_usage", "Tokens and cost over a period.",
             {"type": "object", "properties": {"period": {"enum": ["today", "7d"]}}}),
)
CALL = ToolCall("01J0000000000000000000000A", "get_usage", {"period": "today"})
CONVERSATION = (
    Message("system", "You are overt."),
    Message("user", "What is my burn?"),
    Message("assistant", "", tool_calls=(CALL,)),
    Message("tool", '{"total_cost_usd": 0.0}', tool_call_id=CALL.id, name="get_usage"),
    Message("tool", "boom", tool_call_id="x", name="get_operational_state", is_error=True),
)


def _jinja(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> str:
    """Render with the GGUF's own template, the way transformers does."""
    jinja2 = needs.module("jinja2")
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    template = env.from_string(
        (Path(__file__).parent / "qwen25_chat_template.jinja").read_text(encoding="utf-8"))
    plain: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [{"type": "function", "function": {
                "name": c.name, "arguments": dict(c.arguments)}} for c in m.tool_calls]
        plain.append(item)
    specs = [{"type": "function", "function": {"name": t.name, "description": t.description,
              "parameters": dict(t.input_schema)}} for t in tools]
    rendered: str = template.render(messages=plain, tools=specs or None,
                                    add_generation_prompt=True)
    return rendered


def test_rendering_with_tools_matches_the_gguf_chat_template() -> None:
    assert render_chatml(CONVERSATION, TOOLS) == _jinja(CONVERSATION, TOOLS)


def test_rendering_without_tools_matches_the_gguf_chat_template() -> None:
    assert render_chatml(CONVERSATION, ()) == _jinja(CONVERSATION, ())


def test_rendering_without_a_system_message_uses_qwens_default() -> None:
    messages = (Message("user", "hi"),)
    assert render_chatml(messages, TOOLS) == _jinja(messages, TOOLS)
    assert render_chatml(messages, ()).startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")


def test_a_turn_is_past_its_tool_round_once_a_result_follows_the_last_user_message() -> None:
    assert has_tool_results(CONVERSATION)
    assert not has_tool_results(CONVERSATION[:3])
    assert not has_tool_results((*CONVERSATION, Message("user", "and now?")))


def test_the_answer_rendering_folds_results_into_one_user_message_question_first() -> None:
    folded = answer_messages(CONVERSATION)
    assert [m.role for m in folded] == ["system", "user"]
    text = folded[-1].content
    assert "get_usage returned:\ntotal cost: $0.0" in text  # a JSON result, as short lines
    assert "get_operational_state (error) returned:\nboom" in text
    # The question comes first: put last, the 0.5B model echoed it as its answer.
    assert text.startswith("My question: What is my burn?\n")
    assert text.endswith("with no other numbers.")


def test_the_answer_rendering_gives_the_rows_the_question_names() -> None:
    result = ('{"total_cost_usd": 0.092, "by_model": [{"model": "openai:gpt-4o-mini", '
              '"cost_usd": 0.05}, {"model": "anthropic:claude-sonnet-4", "cost_usd": 0.042}]}')
    folded = answer_messages((
        Message("user", "What did Claude cost?"), Message("assistant", "", tool_calls=(CALL,)),
        Message("tool", result, tool_call_id=CALL.id, name="get_usage")))
    text = folded[-1].content
    assert "asked about: model anthropic:claude-sonnet-4, cost $0.042" in text
    assert "0.092" not in text and "0.05" not in text


def test_the_call_schema_pins_each_name_to_its_own_arguments() -> None:
    schema = call_schema(TOOLS)
    variants = schema["oneOf"]
    assert [v["properties"]["name"] for v in variants] == [
        {"const": "get_operational_state"}, {"const": "get_usage"}]
    assert variants[1]["properties"]["arguments"] == dict(TOOLS[1].input_schema)
    assert all(v["additionalProperties"] is False for v in variants)


def test_a_single_tool_needs_no_one_of_and_a_non_object_schema_becomes_any_object() -> None:
    schema = call_schema((ToolSpec("t", "", {"type": "string"}),))
    assert schema["properties"]["arguments"] == {"type": "object"}


def test_the_loose_schema_still_limits_the_name_to_the_offered_tools() -> None:
    assert loose_call_schema(TOOLS)["properties"]["name"] == {
        "enum": ["get_operational_state", "get_usage"]}
