from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from overt.errors import LedgerError, ModelError
from overt.events import InferenceRecorded, ReasoningStepRecorded, TurnCompleted
from overt.ledger import open_ledger
from overt.ledger.canonical import digest_text
from overt.models.fake import FunctionModel, ScriptedModel
from overt.tools.base import ToolContext, tool
from overt.tools.builtin import builtin_tools
from overt.types import ModelRequest, TurnError
from tests.backends import Raw
from tests.conftest import RuntimeFactory, cli_message, run


@tool(read_only=True)
async def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo:{text}"


@tool
async def explode() -> str:
    """Always fails."""
    raise RuntimeError("boom")


@tool(timeout_s=0.05)
async def slow() -> str:
    """Takes too long."""
    await asyncio.sleep(5)
    return "late"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def kinds(ledger: Any) -> list[str]:
    return [e.kind for e in run(ledger.entries())]


def tool_records(ledger: Any) -> list[dict[str, Any]]:
    return [e.data for e in run(ledger.entries(kinds=["tool_call.completed"]))]


@tool
async def note(text: str) -> str:
    """Write a note (changes something: runs alone)."""
    return f"noted:{text}"


def test_a_turn_with_two_tool_calls_is_recorded_step_by_step(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("note", text="a"), call("note", text="b")]},
                           "both noted"])
    result = run(make_runtime(model, tools=[note]).respond(cli_message()))
    assert result.text == "both noted" and result.error is None
    assert result.tools_used == ["note", "note"]
    assert kinds(ledger) == [
        "runtime.started", "turn.started", "inference", "policy.decision", "tool_call.started",
        "tool_call.completed", "reasoning.step", "policy.decision", "tool_call.started",
        "tool_call.completed", "reasoning.step", "inference", "turn.completed",
    ]
    assert all(r["tool_status"] == "ok" for r in tool_records(ledger))
    second = model.requests[1].messages
    assert [m.content for m in second[-2:]] == ["noted:a", "noted:b"]
    assert run(ledger.verify()).ok


def test_calls_past_the_cap_of_one_response_are_refused_and_the_model_goes_on(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("echo", text=str(i)) for i in range(7)]},
                           {"tool_calls": [call("echo", text="again")]}, "answered"])
    result = run(make_runtime(model, tools=[echo], max_tool_calls=5).respond(cli_message()))
    records = tool_records(ledger)
    assert [r["tool_status"] for r in records] == ["ok"] * 5 + ["not_allowed"] * 2 + ["ok"]
    assert records[6]["reason_code"] == "tool_call_limit_exceeded"
    refused = model.requests[1].messages[-1]
    assert refused.is_error and "at most 5 tool calls per response" in refused.content
    assert model.requests[1].tools != ()  # the next response may call tools again
    assert result.text == "answered" and result.tools_used == ["echo"] * 6


def test_the_turn_ceiling_counts_calls_across_responses_then_tools_go(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("echo", text="x")] * 2}] * 2 + ["done"])
    result = run(make_runtime(model, tools=[echo], max_tool_calls=5,
                              max_tool_calls_per_turn=3).respond(cli_message()))
    assert [r["tool_status"] for r in tool_records(ledger)] == ["ok"] * 3 + ["not_allowed"]
    assert "at most 3 tool calls per turn" in model.requests[2].messages[-1].content
    assert model.requests[2].tools == () and result.text == "done"


def test_an_invented_kwarg_is_a_type_error_the_model_reads_and_the_turn_completes(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("echo", text="a", loudness=11)]},
                           "sorry, retried without it"])
    result = run(make_runtime(model, tools=[echo]).respond(cli_message()))
    error_result = model.requests[1].messages[-1]
    assert error_result.is_error
    assert error_result.content.startswith("tool_execution_error: TypeError")
    assert "loudness" in error_result.content
    assert result.error is None and result.text == "sorry, retried without it"
    (record,) = tool_records(ledger)
    assert record["tool_status"] == "execution_error" and record["exc_type"] == "TypeError"


def test_a_tool_that_raises_is_fail_soft(make_runtime: RuntimeFactory,
                                         ledger: Any) -> None:
    model = ScriptedModel([{"tool_calls": [call("explode")]}, "it failed"])
    result = run(make_runtime(model, tools=[explode]).respond(cli_message()))
    assert model.requests[1].messages[-1].content == "tool_execution_error: RuntimeError: boom"
    assert result.error is None and result.tools_used == ["explode"]
    assert tool_records(ledger)[0]["exc_type"] == "RuntimeError"


def test_an_unknown_tool_is_recorded_by_its_digest_and_never_executed(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("delete_everything")]}, "cannot"])
    result = run(make_runtime(model, tools=[echo]).respond(cli_message()))
    (record,) = tool_records(ledger)
    assert record["tool_status"] == "unknown_tool"
    assert record["tool_name"] == digest_text("delete_everything")
    assert "unknown tool 'delete_everything'" in model.requests[1].messages[-1].content
    assert "tool_call.started" not in kinds(ledger)
    assert result.tools_used == []


def test_a_tool_past_its_timeout_is_recorded_as_timeout(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("slow")]}, "too slow"])
    run(make_runtime(model, tools=[slow]).respond(cli_message()))
    assert tool_records(ledger)[0]["tool_status"] == "timeout"
    assert model.requests[1].messages[-1].content.startswith("tool_timeout")


def test_a_malformed_tool_call_is_an_execution_error_and_nothing_runs(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    from overt.types import ModelResponse, ToolCall

    bad = ModelResponse("", (ToolCall("c1", "echo", {}, malformed="unterminated JSON"),))
    model = ScriptedModel([bad, "ok"])
    result = run(make_runtime(model, tools=[echo]).respond(cli_message()))
    assert tool_records(ledger)[0]["tool_status"] == "execution_error"
    assert "tool_call.started" not in kinds(ledger)
    assert result.error is None


def test_three_tool_errors_in_a_row_get_one_last_model_call_without_tools(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("explode")] * 4},
                           "explode failed three times (RuntimeError: boom), so I stopped."])
    result = run(make_runtime(model, tools=[explode]).respond(cli_message()))
    assert result.text == "explode failed three times (RuntimeError: boom), so I stopped."
    assert len(model.requests) == 2 and model.requests[1].tools == ()
    tool_results = [m for m in model.requests[1].messages if m.role == "tool"]
    assert len(tool_results) == 4 and "tool_error_streak" in tool_results[3].content
    statuses = [r["tool_status"] for r in tool_records(ledger)]
    assert statuses == ["execution_error"] * 3 + ["not_allowed"]
    completed = run(ledger.entries(kinds=["turn.completed"]))[0].event(TurnCompleted)
    assert completed.status == "tool_error_streak"
    steps = [e.event(ReasoningStepRecorded).phase
             for e in run(ledger.entries(kinds=["reasoning.step"]))]
    assert "error" in steps


def test_when_the_last_call_after_a_failure_streak_fails_a_plain_answer_says_so(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("explode")] * 3}, ModelError("down")])
    result = run(make_runtime(model, tools=[explode]).respond(cli_message()))
    assert "3 tool calls in a row failed" in result.text and result.error is None
    completed = run(ledger.entries(kinds=["turn.completed"]))[0].data
    assert completed["status"] == "tool_error_streak"


def test_a_success_resets_the_error_streak(make_runtime: RuntimeFactory) -> None:
    model = ScriptedModel([{"tool_calls": [call("explode"), call("explode"), call("echo", text="x"),
                                           call("explode")]}, "fine"])
    result = run(make_runtime(model, tools=[echo, explode]).respond(cli_message()))
    assert result.text == "fine"


def test_a_model_error_ends_the_turn_with_error_set_and_tools_used_absent(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    model = ScriptedModel([{"tool_calls": [call("echo", text="a")]},
                           ModelError("provider unavailable")])
    result = run(make_runtime(model, tools=[echo]).respond(cli_message()))
    assert result.error == TurnError("model_error", "provider unavailable", "ModelError")
    assert result.tools_used is None
    failed = run(ledger.entries(kinds=["inference"]))[-1].data
    assert failed["error_type"] == "ModelError"
    [entry] = run(ledger.entries(kinds=["turn.completed"]))
    completed = entry.event(TurnCompleted)
    assert (completed.status, completed.error_kind, completed.error_type) == (
        "model_error", "model_error", "ModelError")
    assert completed.error_digest is not None
    assert run(ledger.content(completed.error_digest)) == "provider unavailable"
    assert run(ledger.verify()).ok


def test_an_adapter_bug_is_recorded_as_a_model_error_not_a_crash(
    make_runtime: RuntimeFactory,
) -> None:
    def broken(request: ModelRequest) -> Any:
        raise KeyError("choices")

    result = run(make_runtime(FunctionModel(broken)).respond(cli_message()))
    assert result.error is not None and result.error.kind == "model_error"
    assert result.error.type == "KeyError" and "choices" in result.error.message


def test_tools_used_is_empty_when_the_model_chose_no_tool(make_runtime: RuntimeFactory) -> None:
    result = run(make_runtime(ScriptedModel(["hi"]), tools=[echo]).respond(cli_message()))
    assert result.tools_used == []


def test_the_intent_record_is_committed_before_the_tool_runs(
    make_runtime: RuntimeFactory, ledger_url: str
) -> None:
    seen: list[str] = []

    @tool
    async def inspect_ledger(ctx: ToolContext) -> str:
        """Reads the ledger as another process would while running: every record
        the turn made so far is committed, so the other reader sees it."""
        other = open_ledger(ledger_url)
        seen.extend(e.kind for e in await other.entries(turn_id=ctx.turn_id))
        await other.close()
        return "ok"

    model = ScriptedModel([{"tool_calls": [call("inspect_ledger")]}, "done"])
    run(make_runtime(model, tools=[inspect_ledger]).respond(cli_message()))
    assert seen == ["turn.started", "inference", "policy.decision", "tool_call.started"]


def test_no_tool_runs_when_its_intent_cannot_be_recorded(
    make_runtime: RuntimeFactory, ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[bool] = []

    @tool
    async def effect() -> str:
        """Has an effect."""
        ran.append(True)
        return "done"

    original = ledger.record
    async def failing(events: Any, contents: Any = None) -> Any:
        if any(e.kind == "tool_call.started" for e in events):
            raise LedgerError("disk full")
        return await original(events, contents)

    monkeypatch.setattr(ledger, "record", failing)
    model = ScriptedModel([{"tool_calls": [call("effect")]}, "done"])
    result = run(make_runtime(model, tools=[effect]).respond(cli_message()))
    assert ran == [] and result.error == TurnError("ledger_error", "disk full", "LedgerError")
    assert result.tools_used is None


def test_a_secret_in_the_message_and_arguments_never_reaches_audit_rows_or_log_lines(
    make_runtime: RuntimeFactory, raw: Raw, caplog: pytest.LogCaptureFixture
) -> None:
    from overt.types import ModelResponse, ToolCall

    marker = "SECRET-7f3a9c"
    caplog.set_level(logging.DEBUG)
    model = ScriptedModel([
        ModelResponse(f"thinking about {marker}", (
            ToolCall(f"id-{marker}-1", "echo", {"text": marker}),
            ToolCall(f"id-{marker}-2", "echo", {"text": marker, "bogus": marker}),
            ToolCall(f"id-{marker}-3", f"nope_{marker}", {"x": marker}),
            ToolCall(f"id-{marker}-4", f"bad_{marker}", {}, malformed=f"broken {marker}"))),
        f"the answer mentions {marker}",
    ])
    result = run(make_runtime(model, tools=[echo, *builtin_tools()]).respond(
        cli_message(f"please remember {marker}")))
    assert marker in result.text
    audit_tables = [t for t in raw.tables() if not t.startswith("content_")]
    assert "audit_log" in audit_tables
    for table in audit_tables:
        for row in raw.query(f"SELECT * FROM {table}"):
            assert marker not in json.dumps(row, default=str), f"{table} holds the secret"
    bodies = [bytes(b).decode() if not isinstance(b, str) else b
              for (b,) in raw.query("SELECT body FROM content_blobs")]
    assert any(marker in b for b in bodies)
    tool_lines = [r for r in caplog.records if r.getMessage().startswith("overt.tool_called")]
    assert len(tool_lines) == 4
    for record in caplog.records:
        assert marker not in record.getMessage()


def test_each_tool_call_emits_one_structured_log_line_with_the_record_fields(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="overt.audit")
    model = ScriptedModel([{"tool_calls": [call("echo", text="a")]}, "done"])
    run(make_runtime(model, tools=[echo]).respond(cli_message()))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "overt.audit"]
    fields = json.loads(line.removeprefix("overt.tool_called "))
    assert fields["tool_name"] == "echo" and fields["tool_status"] == "ok"
    assert fields["triggered_by"] == "cli" and fields["caller_session_id"] == "cli:s1"
    assert {"tool_duration_ms", "exc_type", "args_sha256", "tool_call_id"} <= set(fields)


def test_an_invented_tool_name_with_control_characters_is_recorded_only_as_its_digest(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    name = "evil\x00name\nINFO fake log line" + "x" * 500
    model = ScriptedModel([{"tool_calls": [call(name)]}, "no"])
    run(make_runtime(model, tools=[echo]).respond(cli_message()))
    (record,) = tool_records(ledger)
    assert record["tool_status"] == "unknown_tool"
    assert record["tool_name"] == digest_text(name)
    assert run(ledger.verify()).ok


def test_arguments_that_are_not_json_are_stored_as_their_repr_and_the_turn_completes(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    from overt.types import ModelResponse, ToolCall

    odd = {"x": float("nan"), "y": {1, 2}}
    model = ScriptedModel([ModelResponse("", (ToolCall("c1", "echo", odd),)), "done"])
    result = run(make_runtime(model, tools=[echo]).respond(cli_message()))
    assert result.error is None and result.text == "done"
    inference = run(ledger.entries(kinds=["inference"]))[0]
    response_digest = inference.event(InferenceRecorded).response_digest
    assert response_digest is not None
    stored = run(ledger.content(response_digest, seq=inference.seq))
    assert "nan" in stored and "{1, 2}" in stored
    assert run(ledger.verify()).ok


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_arguments_nested_5000_deep_get_a_clear_error_and_the_turn_closes(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    from overt.engine.limits import MAX_ARGUMENT_DEPTH
    from overt.types import ModelResponse, ToolCall

    model = ScriptedModel([ModelResponse("", (ToolCall("c1", "echo", nested(5000)),)), "sorry"])
    result = run(make_runtime(model, tools=[echo]).respond(cli_message()))
    assert result.error is None and result.text == "sorry"
    told = model.requests[1].messages[-1].content
    assert told.startswith("tool_execution_error") and "malformed tool call" in told
    assert f"deeper than {MAX_ARGUMENT_DEPTH} levels" in told
    (record,) = tool_records(ledger)
    assert record["tool_status"] == "execution_error"
    assert record["reason_code"] == "malformed_tool_call"
    assert kinds(ledger)[-1] == "turn.completed"
    assert run(ledger.verify()).ok


def test_oversized_arguments_get_a_clear_error_and_the_tool_never_runs(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    from overt.engine.limits import MAX_ARGUMENT_CHARS
    from overt.types import ModelResponse, ToolCall

    big = {"text": "x" * (MAX_ARGUMENT_CHARS + 1)}
    model = ScriptedModel([ModelResponse("", (ToolCall("c1", "echo", big),)), "too big"])
    result = run(make_runtime(model, tools=[echo]).respond(cli_message()))
    assert result.text == "too big" and result.tools_used == []
    assert f"larger than {MAX_ARGUMENT_CHARS} characters" in model.requests[1].messages[-1].content
    assert "tool_call.started" not in kinds(ledger)
    assert run(ledger.verify()).ok


def test_arguments_just_within_the_depth_limit_are_dispatched(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    from overt.engine.limits import MAX_ARGUMENT_DEPTH, argument_problem

    assert argument_problem(nested(MAX_ARGUMENT_DEPTH - 1)) is None
    assert argument_problem(nested(MAX_ARGUMENT_DEPTH)) is not None
    assert argument_problem([[[]]]) is None


def test_a_direct_call_with_over_deep_arguments_is_refused_and_recorded(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    runtime = make_runtime(ScriptedModel([]), tools=[echo])
    result = run(runtime.call_tool("echo", nested(5000)))
    assert result.is_error and result.status == "execution_error"
    assert "deeper than" in result.content
    assert run(ledger.verify()).ok
