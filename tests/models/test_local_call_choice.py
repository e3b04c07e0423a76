"""LocalModel's call choice on the fake llama of test_local.py: declining (no tool),
id arguments limited to the ids seen, a JSON fence and an earlier answer's figure
taken for a call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from overt.types import Message, ToolSpec
from tests.models.test_local import QUESTION, FakeLlama, _ask, _model, calling, loaded
from tests.models.test_local import fake_llama as fake_llama  # the fixture

NODE = "01M87ZS9587F06BPR29NGTP8CY"
READ = ToolSpec("node_read", "Read a node.", {
    "type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
    read_only=True)


def _variants(grammar: Any) -> dict[str, Any]:
    schema = json.loads(grammar.schema)
    return {v["properties"]["name"]["const"]: v["properties"]["arguments"]
            for v in schema.get("oneOf", [schema])}


def test_choosing_cannot_do_drops_the_call_and_answers_without_tools(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    def script(prompt: str, grammar: Any) -> str:
        if grammar is not None:
            return '{"name": "cannot_do", "arguments": {}}'
        if prompt.endswith("I cannot do that from here."):
            return " Use `overt approvals`."
        return "" if prompt.endswith("</tool_call>") else "<tool_call>"

    model = _model(tmp_path, script)
    response = _ask(model, Message("user", "Approve the pending deploy."))
    assert response.tool_calls == ()
    assert response.text == "I cannot do that from here. Use `overt approvals`."
    assert response.stop_reason == "end_turn"
    shown, constrained, _, answered = loaded().calls
    assert '"name": "cannot_do"' in shown[0]  # listed with the tools
    assert "cannot_do" in _variants(constrained[1])
    assert "# Tools" not in answered[0] and answered[1] is None


def test_choosing_reply_drops_the_call_and_answers_without_tools_or_opening(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    # The 1.5B model opened a call for most messages: get_operational_state for
    # "Good morning!", get_usage for "What is 12% of 250?". ``reply`` is its way out.
    def script(prompt: str, grammar: Any) -> str:
        if grammar is not None:
            return '{"name": "reply", "arguments": {}}'
        if "# Tools" not in prompt:
            return "30."
        return "" if prompt.endswith("</tool_call>") else "<tool_call>"

    model = _model(tmp_path, script)
    response = _ask(model, Message("user", "What is 12% of 250?"))
    assert response.tool_calls == () and response.text == "30."
    assert response.stop_reason == "end_turn"
    assert "reply_redecoded" in response.decisions
    shown, constrained, _, answered = loaded().calls
    assert '"name": "reply"' in shown[0]
    # a question: the reply and the tools that read, never the decline
    assert "reply" in _variants(constrained[1]) and "cannot_do" not in _variants(constrained[1])
    assert "# Tools" not in answered[0] and answered[1] is None
    assert not answered[0].endswith("I cannot do that from here.")


def test_a_reply_with_a_figure_from_nothing_is_dropped_for_a_call(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    # "And yesterday?" answered through ``reply`` with a made-up sum: only a tool can
    # give that figure, so the reply is dropped and the call decoded at once.
    chose: list[str] = []

    def script(prompt: str, grammar: Any) -> str:
        if grammar is not None:
            names = _variants(grammar)
            chose.append(",".join(sorted(names)))
            return ('{"name": "reply", "arguments": {}}' if "reply" in names else
                    '{"name": "get_usage", "arguments": {"period": "yesterday"}}')
        if "# Tools" not in prompt:
            return "Yesterday you spent $0.75."
        return "" if prompt.endswith("</tool_call>") else "<tool_call>"

    model = _model(tmp_path, script)
    response = _ask(model, Message("user", "What did I spend today?"),
                    Message("assistant", "Today you spent $0.0335."),
                    Message("user", "And yesterday?"))
    assert [(c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("get_usage", {"period": "yesterday"})]
    assert response.stop_reason == "tool_use"
    assert "reply" in chose[0] and "reply" not in chose[-1]  # the second time, tools only


def test_a_reply_working_on_the_operators_own_numbers_stands(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    def script(prompt: str, grammar: Any) -> str:
        if grammar is not None:
            return '{"name": "reply", "arguments": {}}'
        if "# Tools" not in prompt:
            return "90 minutes are 5400 seconds."
        return "" if prompt.endswith("</tool_call>") else "<tool_call>"

    response = _ask(_model(tmp_path, script),
                    Message("user", "How many seconds are in 90 minutes?"))
    assert response.tool_calls == () and response.text == "90 minutes are 5400 seconds."


def test_the_decline_answer_opens_in_japanese_for_a_japanese_request(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    def script(prompt: str, grammar: Any) -> str:
        if grammar is not None:
            return '{"name": "cannot_do", "arguments": {}}'
        return "" if prompt.endswith(("。", "</tool_call>")) else "<tool_call>"

    response = _ask(_model(tmp_path, script), Message("user", "自分を一時停止して。"))
    assert response.text == "それはここからはできません。"


def test_without_decline_neither_choice_is_offered(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    def script(prompt: str, grammar: Any) -> str:
        if grammar is not None:
            return '{"name": "get_usage", "arguments": {}}'
        return "" if prompt.endswith("</tool_call>") else "<tool_call>"

    model = _model(tmp_path, script, decline=False)
    _ask(model, QUESTION)
    for name in ("cannot_do", "reply"):
        assert f'"name": "{name}"' not in loaded().calls[0][0]
        assert name not in _variants(loaded().calls[1][1])


def test_id_arguments_take_only_ids_the_conversation_holds(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    script = calling(f'{{"name": "node_read", "arguments": {{"id": "{NODE}"}}}}')
    model = _model(tmp_path, script)
    tools = (READ,)
    _ask(model, Message("user", "Open the staging note."), tools=tools)
    assert "node_read" not in _variants(loaded().calls[1][1])  # no id seen: left out
    loaded().calls.clear()
    response = _ask(model, Message("assistant", f"Node {NODE} holds it."),
                    Message("user", "Read it."), tools=tools)
    assert _variants(loaded().calls[1][1])["node_read"]["properties"]["id"] == {
        "enum": [NODE]}
    assert response.tool_calls[0].arguments == {"id": NODE}


def test_a_reply_opening_a_json_fence_is_decoded_as_a_call(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    script = calling('{"name": "get_usage", "arguments": {"period": "30d"}}',
                     '```json\n{"usage": {"tokens": 100}}\n```')
    response = _ask(_model(tmp_path, script), QUESTION)
    assert [c.name for c in response.tool_calls] == ["get_usage"]
    assert "100" not in response.text


def test_a_reply_restating_an_earlier_answers_figure_becomes_a_call(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    script = calling('{"name": "get_usage", "arguments": {"period": "7d"}}',
                     "Over the last 7 days you spent $0.0500.")
    history = (Message("user", "What did I spend today?"),
               Message("assistant", "Today you spent $0.0500 over 6 inferences."))
    response = _ask(_model(tmp_path, script), *history,
                    Message("user", "And over the last 7 days?"))
    assert [(c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("get_usage", {"period": "7d"})]
    answer = _ask(_model(tmp_path, script), *history, Message("user", "And 7 days?"),
                  tools=())
    assert answer.text == "Over the last 7 days you spent $0.0500."  # no tools: as decoded


def test_a_follow_up_answered_with_a_figure_from_nowhere_becomes_a_call(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    script = calling('{"name": "get_usage", "arguments": {"period": "7d"}}',
                     "That was 1 token.")
    history = (Message("user", "How much did I spend this week?"),
               Message("assistant", "This week you spent $0.0920 over 9 inferences."))
    response = _ask(_model(tmp_path, script), *history,
                    Message("user", "How many tokens was that?"))
    assert [(c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("get_usage", {"period": "7d"})]
    first = _ask(_model(tmp_path, script), Message("user", "How many tokens was that?"))
    assert first.tool_calls == () and first.text == "That was 1 token."  # no follow-up


def test_the_model_says_what_it_lists_for_the_offered_tools(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    from overt.models.base import ListsTools

    model = _model(tmp_path, lambda prompt, grammar: "")
    assert isinstance(model, ListsTools)
    assert [t.name for t in model.shown_tools((READ,))] == ["node_read", "cannot_do", "reply"]
    assert model.shown_tools(()) == ()
    plain = _model(tmp_path, lambda prompt, grammar: "", decline=False)
    assert [t.name for t in plain.shown_tools((READ,))] == ["node_read"]


def test_a_reply_restating_an_earlier_answers_figure_is_dropped_for_a_call(
    tmp_path: Path, fake_llama: type[FakeLlama],
) -> None:
    # "And yesterday?" answered through ``reply`` with today's figure: the same rule
    # as for a reply written without a call
    def script(prompt: str, grammar: Any) -> str:
        if grammar is not None:
            return ('{"name": "reply", "arguments": {}}' if "reply" in _variants(grammar)
                    else '{"name": "get_usage", "arguments": {"period": "yesterday"}}')
        if "# Tools" not in prompt:
            return "Yesterday you spent $0.0335."
        return "" if prompt.endswith("</tool_call>") else "<tool_call>"

    response = _ask(_model(tmp_path, script), Message("user", "What did I spend today?"),
                    Message("assistant", "Today you spent $0.0335."),
                    Message("user", "And yesterday?"))
    assert [c.name for c in response.tool_calls] == ["get_usage"]
