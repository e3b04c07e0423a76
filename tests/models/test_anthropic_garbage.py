"""The Anthropic adapter against a server that answers badly, over the real wire (the
fake of test_anthropic): every reply it cannot read is a ModelOutputError naming the
model, never an SDK assertion or a JSON traceback; a stream cut before its
``message_stop`` is not taken for a whole answer; a tool call whose input JSON was
cut, or that has no name, is a malformed call, refused and recorded."""

from __future__ import annotations

from typing import Any

import pytest

from overt.errors import ModelOutputError
from overt.tools.builtin import builtin_tools
from tests.conftest import RuntimeFactory, cli_message, run
from tests.models.test_anthropic import (
    WEATHER,
    FakeAnthropic,
    Reply,
    api,
    ask,
    message,
    model,
    sse,
    streamed_tool_call,
    text,
)

__all__ = ["api"]  # the fixture, imported to be used here

HTML = {"content-type": "text/html"}
JSON = {"content-type": "application/json"}


@pytest.mark.slow
@pytest.mark.parametrize(("body", "headers", "says"), [
    ("<html><body>502 Bad gateway</body></html>", HTML, "not a Messages API message"),
    ("<html>oops</html>", JSON, "the reply is not JSON"),
    ("", JSON, "the reply is not JSON"),
    ("[1, 2]", JSON, "not a Messages API message"),
    ('{"id": "msg_1", "type": "message"}', JSON, "content is not a list of blocks"),
    ('{"id": "msg_1", "type": "message", "content": [1, 2]}', JSON, "not a list of blocks"),
])
def test_a_200_that_is_not_a_message_is_a_model_output_error(
        api: FakeAnthropic, body: str, headers: dict[str, str], says: str) -> None:
    api.script(Reply(body, headers=headers))
    with pytest.raises(ModelOutputError, match=f"anthropic:claude-test-1: .*{says}"):
        run(model(api, max_retries=0).complete(ask()))


def cut(stream: str, before: str) -> str:
    return stream[:stream.index(before)]


@pytest.mark.parametrize("body", [
    cut(streamed_tool_call(), "event: message_delta"),  # every block, no message_stop
    cut(streamed_tool_call(), '"Let me "'),  # mid-event
    "",
    "<html>not a stream</html>",
])
def test_a_stream_that_ends_before_its_message_stop_is_not_an_answer(
        api: FakeAnthropic, body: str) -> None:
    api.script(Reply(body))
    with pytest.raises(ModelOutputError, match=r"before its message_stop|could not be read"):
        run(model(api, stream=True, max_retries=0).complete(ask()))


@pytest.mark.parametrize("body", [
    sse({"type": "content_block_start", "index": 0, "content_block": text("")},
        {"type": "message_stop"}),  # no message_start: the SDK asserts
    streamed_tool_call().replace('"index": 2', '"index": 9'),  # a block never started
    "event: message_start\ndata: {not json\n\n",
])
def test_a_stream_the_sdk_cannot_follow_is_a_model_output_error(
        api: FakeAnthropic, body: str) -> None:
    api.script(Reply(body))
    with pytest.raises(ModelOutputError, match="the streamed reply could not be read"):
        run(model(api, stream=True, max_retries=0).complete(ask()))


def test_a_streamed_tool_input_cut_short_is_a_malformed_call_not_empty_arguments(
        api: FakeAnthropic) -> None:
    """The SDK reads the input JSON in partial mode: ``{"city": "Oslo`` read as ``{}``,
    a call with no arguments that would have run."""
    cut_input = streamed_tool_call().replace('"partial_json": "\\"Oslo\\"}"',
                                             '"partial_json": "\\"Oslo"')
    api.script(Reply(cut_input))
    response = run(model(api, stream=True, max_retries=0).complete(
        ask("weather?", tools=(WEATHER,))))
    [call] = response.tool_calls
    assert call.name == "get_weather" and call.malformed


def test_a_tool_without_input_streams_an_empty_delta_and_is_well_formed(
        api: FakeAnthropic) -> None:
    empty = streamed_tool_call().replace('"partial_json": "{\\"city\\": "', '"partial_json": ""') \
        .replace('"partial_json": "\\"Oslo\\"}"', '"partial_json": ""')
    api.script(Reply(empty))
    [call] = run(model(api, stream=True).complete(ask("weather?", tools=(WEATHER,)))).tool_calls
    assert call.malformed is None and call.arguments == {}


@pytest.mark.parametrize("block", [{"type": "tool_use", "id": "t1", "input": {}},
                                   {"type": "tool_use", "id": "t1", "name": None, "input": {}},
                                   {"type": "tool_use", "id": "t1", "name": "", "input": {}}])
def test_a_tool_use_without_a_name_is_malformed(api: FakeAnthropic,
                                                block: dict[str, Any]) -> None:
    api.script(Reply(message(block, stop_reason="tool_use")))
    [call] = run(model(api).complete(ask("weather?", tools=(WEATHER,)))).tool_calls
    assert call.malformed == "the tool_use block has no name"


def test_a_turn_on_a_cut_stream_ends_recorded_with_the_error_and_the_ledger_verifies(
        api: FakeAnthropic, make_runtime: RuntimeFactory, ledger: Any) -> None:
    api.script(Reply(cut(streamed_tool_call(), "event: message_delta")))
    runtime = make_runtime(model(api, stream=True, max_retries=0), tools=builtin_tools())
    result = run(runtime.respond(cli_message("what's my burn?")))
    assert result.error is not None and result.error.kind == "model_error"
    assert "message_stop" in result.error.message
    assert result.text != "Let me check."  # the partial text is not the answer
    [completed] = run(ledger.entries(kinds=["turn.completed"]))
    assert completed.data["status"] != "completed"
    assert run(ledger.verify()).ok


def test_a_malformed_call_from_the_wire_is_refused_recorded_and_the_turn_goes_on(
        api: FakeAnthropic, make_runtime: RuntimeFactory, ledger: Any) -> None:
    api.script(Reply(message({"type": "tool_use", "id": "t1", "input": {"period": "today"}},
                             stop_reason="tool_use")),
               Reply(message(text("I could not call that tool."))))
    runtime = make_runtime(model(api), tools=builtin_tools())
    result = run(runtime.respond(cli_message("what's my burn?")))
    assert result.error is None and result.text == "I could not call that tool."
    assert result.tools_used == []
    assert run(ledger.verify()).ok
