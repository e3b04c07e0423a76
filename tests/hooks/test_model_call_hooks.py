"""The model-call hooks: rewrite the request, narrow the tools, reissue once, observe, transform."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from overt.engine.answer_stream import AnswerDelta, AnswerEvent, AnswerReset
from overt.events import Event
from overt.hooks import Reissue, hookimpl
from overt.models.fake import ScriptedModel
from overt.tools.base import tool
from overt.types import ModelRequest, ModelResponse, ToolSpec
from tests.conftest import cli_message, run
from tests.hooks.conftest import PluggedFactory, kinds, records


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(read_only=True)
async def delete_key(key: str) -> str:
    """Delete a key."""
    return "deleted"


class AlwaysReissue:
    """Answers every response with a reissue to ``model``."""

    def __init__(self, model: str | None, asked: list[str]) -> None:
        self.model = model
        self.asked = asked

    @hookimpl
    def post_llm_call_can_reissue(self, iteration: int) -> Reissue:
        self.asked.append(f"{type(self).__name__}@{iteration}")
        return Reissue(model=self.model, context="check this answer", reason_code="low_conf")


class AlsoReissue(AlwaysReissue):
    pass


def test_one_reissue_per_iteration_however_many_plugins_answer(
    plugged: PluggedFactory, ledger: Any
) -> None:
    asked: list[str] = []
    cheap = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}]},
                           "cheap final"], name="cheap")
    strong = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": "b"}}]},
                            "strong final"], name="strong")
    runtime = plugged(cheap, AlwaysReissue("strong", asked), AlsoReissue("strong", asked),
                      tools=[lookup])
    runtime.models.add(strong)
    result = run(runtime.respond(cli_message()))
    assert result.text == "strong final"
    assert len(cheap.requests) == 2 and len(strong.requests) == 2  # one reissue each iteration
    assert asked == ["AlwaysReissue@0", "AlwaysReissue@1"]  # first answer wins, once
    assert strong.requests[0].messages[-1].content == "check this answer"
    assert result.tools_used == ["lookup"]  # the reissued answer's tool call ran
    assert model_names(ledger) == ["cheap", "strong", "cheap", "strong"]
    inferences = records(ledger, "inference")
    assert [i["escalated"] for i in inferences] == [False, True, False, True]
    reissues = records(ledger, "hook.reissued")
    assert [(r["plugin"], r["iteration"], r["from_model"], r["to_model"], r["reason_code"])
            for r in reissues] == [("AlwaysReissue", 0, "cheap", "strong", "low_conf"),
                                   ("AlwaysReissue", 1, "cheap", "strong", "low_conf")]
    assert run(ledger.content(reissues[0]["context_digest"])) == "check this answer"
    assert run(ledger.verify()).ok


def model_names(ledger: Any) -> list[str]:
    return [i["model"] for i in records(ledger, "inference")]


def test_post_api_request_sees_only_the_final_response_after_a_reissue(
    plugged: PluggedFactory,
) -> None:
    seen: list[tuple[str, str, bool]] = []

    class Observer:
        @hookimpl
        def post_api_request(self, response: ModelResponse, model: str, reissued: bool) -> None:
            seen.append((response.text, model, reissued))

    cheap = ScriptedModel(["cheap answer"], name="cheap")
    strong = ScriptedModel(["strong answer"], name="strong")
    runtime = plugged(cheap, AlwaysReissue("strong", []), Observer())
    runtime.models.add(strong)
    result = run(runtime.respond(cli_message()))
    assert result.text == "strong answer"
    assert seen == [("strong answer", "strong", True)]


def test_a_reissue_without_a_model_asks_the_same_model_again(plugged: PluggedFactory) -> None:
    model = ScriptedModel(["first", "second"])
    result = run(plugged(model, AlwaysReissue(None, [])).respond(cli_message()))
    assert result.text == "second" and len(model.requests) == 2


def test_a_reissue_to_an_unknown_model_keeps_the_first_answer_on_the_record(
    plugged: PluggedFactory, ledger: Any
) -> None:
    model = ScriptedModel(["first"])
    result = run(plugged(model, AlwaysReissue("nowhere", [])).respond(cli_message()))
    assert result.text == "first"
    (error,) = records(ledger, "hook.error")
    assert error["hook"] == "post_llm_call_can_reissue" and error["consequence"] == "ignored"
    assert records(ledger, "hook.reissued") == []


def test_a_failed_reissue_keeps_the_first_answer(plugged: PluggedFactory, ledger: Any) -> None:
    from overt.errors import ModelError

    model = ScriptedModel(["first", ModelError("overloaded")])
    result = run(plugged(model, AlwaysReissue(None, [])).respond(cli_message()))
    assert result.text == "first" and result.error is None
    assert [i["error_type"] for i in records(ledger, "inference")] == [None, "ModelError"]


def test_a_raising_reissue_check_falls_through_to_the_next_plugin(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Broken:
        @hookimpl
        def post_llm_call_can_reissue(self) -> None:
            raise RuntimeError("router down")

    model = ScriptedModel(["first", "second"])
    result = run(plugged(model, Broken(), AlwaysReissue(None, [])).respond(cli_message()))
    assert result.text == "second"
    assert records(ledger, "hook.error")[0]["consequence"] == "fell_through"


def test_a_rewritten_request_is_sent_and_recorded_by_shape_only(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Trims:
        @hookimpl
        def pre_api_request(self, request: ModelRequest) -> ModelRequest:
            return replace(request, messages=request.messages[-1:], tools=())

    model = ScriptedModel(["hi"])
    run(plugged(model, Trims(), tools=[lookup]).respond(cli_message("hello")))
    sent = model.requests[0]
    assert [m.content for m in sent.messages] == ["hello"] and sent.tools == ()
    (rewritten,) = records(ledger, "hook.request_rewritten")
    assert rewritten == {"plugin": "Trims", "hook": "pre_api_request", "iteration": 0,
                         "messages_before": 2, "messages_after": 1,
                         "tools_before": ["lookup"], "tools_after": []}


def test_a_request_left_as_it_was_is_not_recorded_as_rewritten(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Same:
        @hookimpl
        def pre_api_request(self, request: ModelRequest) -> ModelRequest:
            return request

    run(plugged(ScriptedModel(["hi"]), Same()).respond(cli_message()))
    assert records(ledger, "hook.request_rewritten") == []


def test_a_narrowed_tool_list_is_offered_prompted_and_enforced(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class ReadOnly:
        @hookimpl
        def pre_tool_list_finalized(self, tools: list[ToolSpec]) -> list[ToolSpec]:
            return [t for t in tools if t.name != "delete_key"]

    model = ScriptedModel([{"tool_calls": [{"name": "delete_key", "arguments": {"key": "k"}}]},
                           "could not"])
    result = run(plugged(model, ReadOnly(), tools=[lookup, delete_key]).respond(cli_message()))
    first = model.requests[0]
    assert [t.name for t in first.tools] == ["lookup"]
    assert "delete_key" not in first.messages[0].content  # the system prompt follows
    assert result.tools_used == []
    assert records(ledger, "tool_call.completed")[0]["tool_status"] == "not_allowed"
    (narrowed,) = records(ledger, "hook.tools_narrowed")
    assert narrowed == {"plugin": "ReadOnly", "hook": "pre_tool_list_finalized",
                        "tools_before": ["lookup", "delete_key"], "tools_after": ["lookup"]}


def test_a_tool_list_may_be_extended_with_an_openai_shaped_descriptor(
    plugged: PluggedFactory,
) -> None:
    class Adds:
        @hookimpl
        def pre_tool_list_finalized(self, tools: list[ToolSpec]) -> list[Any]:
            return [*tools, {"type": "function", "function": {
                "name": "weather", "description": "Weather.", "parameters": {
                    "type": "object", "properties": {}}}}]

    model = ScriptedModel(["hi"])
    run(plugged(model, Adds(), tools=[lookup]).respond(cli_message()))
    assert [t.name for t in model.requests[0].tools] == ["lookup", "weather"]


def test_a_junk_tool_list_is_recorded_and_the_tools_stay_as_they_were(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Junk:
        @hookimpl
        def pre_tool_list_finalized(self) -> list[Any]:
            return [42]

    model = ScriptedModel(["hi"])
    run(plugged(model, Junk(), tools=[lookup]).respond(cli_message()))
    assert [t.name for t in model.requests[0].tools] == ["lookup"]
    assert records(ledger, "hook.error")[0]["hook"] == "pre_tool_list_finalized"


def test_the_final_text_can_be_transformed_and_both_bodies_are_kept(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Signs:
        @hookimpl
        def transform_llm_output(self, text: str) -> str:
            return text + " (checked)"

    result = run(plugged(ScriptedModel(["fine"]), Signs()).respond(cli_message()))
    assert result.text == "fine (checked)"
    (changed,) = records(ledger, "hook.transformed")
    assert run(ledger.content(changed["before_digest"])) == "fine"
    (done,) = records(ledger, "turn.completed")
    assert done["reply_digest"] == changed["after_digest"]


def test_on_event_sees_every_committed_event_in_order(
    plugged: PluggedFactory, ledger: Any
) -> None:
    seen: list[Event] = []

    class Watches:
        @hookimpl
        async def on_event(self, event: Event) -> None:
            seen.append(event)

    model = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}]},
                           "done"])
    run(plugged(model, Watches(), tools=[lookup]).respond(cli_message()))
    assert [e.kind for e in seen] == kinds(ledger)[1:]  # all but runtime.started


def test_a_raising_on_event_is_recorded_once_and_cannot_feed_itself(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Broken:
        @hookimpl
        def on_event(self, event: Event) -> None:
            raise RuntimeError("sink down")

    run(plugged(ScriptedModel(["hi"]), Broken()).respond(cli_message()))
    errors = records(ledger, "hook.error")
    assert len(errors) == 3  # turn.started, inference, turn.completed; not the errors themselves
    assert {e["hook"] for e in errors} == {"on_event"}
    assert run(ledger.verify()).ok


def test_a_reissued_answer_withdraws_the_first_from_the_stream(
    plugged: PluggedFactory, ledger: Any
) -> None:
    events: list[AnswerEvent] = []
    cheap = ScriptedModel(["I am not sure"], name="cheap")
    strong = ScriptedModel(["It is 42."], name="strong")
    runtime = plugged(cheap, AlwaysReissue("strong", []))
    runtime.models.add(strong)
    result = run(runtime.respond(cli_message(), on_answer=events.append))
    assert result.text == "It is 42."
    reset = events.index(AnswerReset("reissue"))
    before, after = events[:reset], events[reset + 1:]
    assert "".join(e.text for e in before if isinstance(e, AnswerDelta)) == "I am not sure"
    assert "".join(e.text for e in after if isinstance(e, AnswerDelta)) == "It is 42."
    assert all(isinstance(e, AnswerDelta) for e in before + after)


def test_with_a_transform_plugin_the_answer_streams_only_once_rewritten(
    plugged: PluggedFactory
) -> None:
    class Redacts:
        @hookimpl
        def transform_llm_output(self, text: str) -> str:
            return text.replace("hunter2", "[redacted]")

    events: list[AnswerEvent] = []
    result = run(plugged(ScriptedModel(["the password is hunter2"]), Redacts()).respond(
        cli_message(), on_answer=events.append))
    assert events == [AnswerDelta("the password is [redacted]")] and result.text == \
        "the password is [redacted]"
