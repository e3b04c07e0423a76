"""A turn's answer streamed to a sink: the deltas are the recorded reply, the record unchanged."""

from __future__ import annotations

from typing import Any

from overt.engine.answer_stream import AnswerDelta, AnswerEvent, AnswerReset, AnswerStream
from overt.errors import ModelError
from overt.ledger.canonical import digest_text
from overt.models.base import TextSink
from overt.models.fake import ScriptedModel
from overt.tools.base import tool
from overt.types import ModelRequest, ModelResponse
from tests.channels.helpers import payroll_runtime
from tests.conftest import RuntimeFactory, cli_message, run


@tool(read_only=True)
async def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo:{text}"


def shown(events: list[AnswerEvent]) -> str:
    """What a screen holds after ``events``: the deltas since the last reset."""
    text = ""
    for event in events:
        text = text + event.text if isinstance(event, AnswerDelta) else ""
    return text


_DIGESTS = ("message_digest", "response_digest", "reply_digest", "args_digest",
            "result_digest", "content_digest")


def record_shape(ledger: Any, turn_id: str) -> list[tuple[str, dict[str, Any]]]:
    """A turn's entries: kinds and content digests, in order."""
    return [(e.kind, {k: v for k, v in e.data.items() if k in _DIGESTS})
            for e in run(ledger.entries(turn_id=turn_id))]


def test_deltas_arrive_in_order_and_concatenate_to_the_recorded_answer(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    events: list[AnswerEvent] = []
    answer = "The usage today is 735 tokens,\n\nspent on 3 turns."
    result = run(make_runtime(ScriptedModel([answer])).respond(cli_message(),
                                                               on_answer=events.append))
    assert all(isinstance(e, AnswerDelta) for e in events) and len(events) > 3
    assert "".join(e.text for e in events if isinstance(e, AnswerDelta)) == answer
    (done,) = [e.data for e in run(ledger.entries(kinds=["turn.completed"]))]
    assert done["reply_digest"] == digest_text(result.text) == digest_text(answer)


def test_a_streamed_turn_is_recorded_exactly_as_one_that_is_not(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    script = [{"text": "Let me look.", "tool_calls": [{"id": "call_1", "name": "echo",
                                                       "arguments": {"text": "x"}}]},
              "It said echo:x."]
    quiet = run(make_runtime(ScriptedModel(script), tools=[echo]).respond(cli_message()))
    streamed = run(make_runtime(ScriptedModel(script), tools=[echo]).respond(
        cli_message(), on_answer=lambda event: None))
    assert streamed.text == quiet.text
    assert record_shape(ledger, streamed.turn_id) == record_shape(ledger, quiet.turn_id)
    assert run(ledger.verify()).ok


def test_text_before_a_tool_call_is_withdrawn_and_the_answer_streams_after(
    make_runtime: RuntimeFactory
) -> None:
    events: list[AnswerEvent] = []
    script = [{"text": "Let me look.", "tool_calls": [{"name": "echo",
                                                       "arguments": {"text": "x"}}]},
              "It said echo:x."]
    result = run(make_runtime(ScriptedModel(script), tools=[echo]).respond(
        cli_message(), on_answer=events.append))
    assert AnswerReset("tool_call") in events
    assert shown(events) == result.text == "It said echo:x."


class Breaks:
    """Streams a few words, then the provider fails."""

    name = "breaks"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise ModelError("the connection dropped")

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        on_text("The answer ")
        on_text("is ")
        raise ModelError("the connection dropped")


def test_an_error_mid_stream_ends_the_turn_with_its_record_and_the_screen_says_so(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    events: list[AnswerEvent] = []
    result = run(make_runtime(Breaks()).respond(cli_message(), on_answer=events.append))
    assert result.error is not None and result.error.kind == "model_error"
    assert result.error.message == "the connection dropped"
    assert events[:2] == [AnswerDelta("The answer "), AnswerDelta("is ")]
    assert AnswerReset("replaced") in events
    assert shown(events) == result.text
    (done,) = [e.data for e in run(ledger.entries(kinds=["turn.completed"]))]
    assert done["status"] == "model_error" and done["reply_digest"] == digest_text(result.text)
    assert run(ledger.verify()).ok


def test_a_sink_that_fails_stops_the_stream_not_the_turn(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    got: list[AnswerEvent] = []

    def gone(event: AnswerEvent) -> None:  # a client that went away
        got.append(event)
        raise BrokenPipeError("the client disconnected")

    result = run(make_runtime(ScriptedModel(["one two three"])).respond(cli_message(),
                                                                       on_answer=gone))
    assert result.text == "one two three" and result.error is None
    assert len(got) == 1  # nothing more was sent after the failure
    (done,) = [e.data for e in run(ledger.entries(kinds=["turn.completed"]))]
    assert done["status"] == "completed" and done["reply_digest"] == digest_text(result.text)


def test_a_turn_paused_for_approval_shows_the_notice_it_records(ledger: Any) -> None:
    events: list[AnswerEvent] = []
    model = ScriptedModel([{"text": "Checking payroll.", "tool_calls": [
        {"name": "payroll", "arguments": {"month": "2026-01"}}]}])
    result = run(payroll_runtime(ledger, model).respond(cli_message(), on_answer=events.append))
    assert result.awaiting_approval is not None
    assert shown(events) == result.text


def test_settling_sends_what_was_held_back_or_replaces_what_differs() -> None:
    events: list[AnswerEvent] = []
    stream = AnswerStream(events.append)
    stream.text("Hello")
    stream.settle("Hello, world")
    assert events == [AnswerDelta("Hello"), AnswerDelta(", world")]
    stream.settle("Bye")
    assert events[2:] == [AnswerReset("replaced"), AnswerDelta("Bye")]
    quiet: list[AnswerEvent] = []
    held = AnswerStream(quiet.append, live=False)
    held.text("secret")
    held.settle("[redacted]")
    assert quiet == [AnswerDelta("[redacted]")]
