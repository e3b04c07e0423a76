from __future__ import annotations

import asyncio
import io
import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from overt.errors import ExtraMissingError, UsageError
from overt.events import ToolCallCompleted, TurnStarted
from overt.ledger.canonical import canonical_json, digest_text
from overt.ledger.export import export_jsonl
from overt.ledger.sqlite import SqliteLedger
from overt.models.fake import ScriptedModel
from overt.telemetry.exporters import make_span_exporter, span_json
from overt.telemetry.spans import at_ns, export_otel, otel_spans, spans_from_entries
from overt.tools.base import tool
from overt.types import ModelResponse, ToolCall, Usage
from tests import needs
from tests.conftest import RuntimeFactory, cli_message, run

SECRET = "SECRET-MARKER-7f3a"
CONTENT_WORDS = ("message", "prompt", "completion", "content", "arguments", "result")


@tool(read_only=True)
async def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo:{text}"


def tool_turn(tool_name: str = "get_usage", call_id: str = "call-1",
              **arguments: Any) -> list[Any]:
    """Replies for a turn with one tool call (11 in / 3 out tokens), then an answer."""
    return [
        ModelResponse("", (ToolCall(call_id, tool_name, arguments),), Usage(11, 3, 0.0002),
                      "scripted", "tool_use"),
        ModelResponse("done", (), Usage(20, 5, 0.0003), "scripted", "end_turn"),
    ]


@pytest.fixture
def memory() -> Any:
    module = needs.module("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    return module.InMemorySpanExporter()


def exported(ledger: SqliteLedger, memory: Any, **filters: Any) -> list[Any]:
    memory.clear()
    run(export_otel(ledger, memory, **filters))
    return list(memory.get_finished_spans())


def by_name(spans: Sequence[Any]) -> dict[str, Any]:
    return {s.name: s for s in spans}


def one_tool_turn(make_runtime: RuntimeFactory, session: str = "s1", **arguments: Any) -> None:
    runtime = make_runtime(ScriptedModel(tool_turn(**arguments)))
    result = run(runtime.respond(cli_message("how much?", session=session)))
    assert result.error is None


# -- JSON lines ---------------------------------------------------------------

def test_jsonl_writes_each_audit_entry_as_one_canonical_line_in_seq_order(
    make_runtime: RuntimeFactory, ledger: SqliteLedger
) -> None:
    one_tool_turn(make_runtime)
    out = io.StringIO()
    count = run(export_jsonl(ledger, out))
    entries = run(ledger.entries())
    assert count == len(entries) == 9  # with the policy decision and the step
    assert out.getvalue().splitlines() == [canonical_json(e.to_dict()) for e in entries]


def test_jsonl_filters_by_session_since_and_until(
    make_runtime: RuntimeFactory, ledger: SqliteLedger
) -> None:
    one_tool_turn(make_runtime, session="a")
    one_tool_turn(make_runtime, session="b")
    b_start = run(ledger.entries(session_id="cli:b"))[0].at

    def lines(**filters: Any) -> list[dict[str, Any]]:
        out = io.StringIO()
        run(export_jsonl(ledger, out, **filters))
        return [json.loads(line) for line in out.getvalue().splitlines()]

    assert [e["session_id"] for e in lines(session_id="cli:b")] == ["cli:b"] * 8
    assert {e["session_id"] for e in lines(since=b_start)} == {"cli:b"}
    assert {e["session_id"] for e in lines(until=b_start)} == {None, "cli:a"}
    assert lines(since=b_start, until=b_start) == []


# -- spans ----------------------------------------------------------------------

def test_a_turn_becomes_an_invoke_agent_span_with_chat_and_execute_tool_children(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    one_tool_turn(make_runtime)
    spans = exported(ledger, memory)
    assert [s.name for s in spans] == [
        "invoke_agent overt", "chat scripted", "execute_tool get_usage", "chat scripted"]
    turn = spans[0]
    assert turn.parent is None
    assert {s.context.trace_id for s in spans} == {turn.context.trace_id}
    assert all(s.parent.span_id == turn.context.span_id for s in spans[1:])
    assert len({s.context.span_id for s in spans}) == 4


def test_span_attributes_follow_the_genai_conventions_with_overt_fields_namespaced(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    one_tool_turn(make_runtime)
    spans = by_name(exported(ledger, memory))
    entries = {e.kind: e for e in run(ledger.entries())}
    turn = dict(spans["invoke_agent overt"].attributes)
    assert turn["gen_ai.operation.name"] == "invoke_agent"
    assert turn["gen_ai.agent.name"] == "overt"
    assert turn["gen_ai.provider.name"] == "scripted"
    assert turn["gen_ai.request.model"] == "scripted"
    assert turn["gen_ai.conversation.id"] == "cli:s1"
    assert (turn["gen_ai.usage.input_tokens"], turn["gen_ai.usage.output_tokens"]) == (31, 8)
    assert turn["overt.channel"] == "cli" and turn["overt.caller_session_id"] == "cli:s1"
    assert turn["overt.turn_id"] == entries["turn.started"].turn_id
    assert turn["overt.route"] == "default" and turn["overt.turn_status"] == "completed"
    assert turn["overt.cost_usd"] == pytest.approx(0.0005)
    assert turn["overt.ledger.seq"] == entries["turn.completed"].seq
    assert turn["overt.ledger.hash"] == entries["turn.completed"].hash
    assert "error.type" not in turn

    chat = dict(spans["chat scripted"].attributes)  # the last inference of the turn
    assert chat["gen_ai.operation.name"] == "chat"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (20, 5)
    assert chat["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert chat["overt.escalated"] is False and chat["overt.cost_usd"] == 0.0003
    assert chat["overt.ledger.hash"] == entries["inference"].hash

    tool_span = spans["execute_tool get_usage"]
    attrs = dict(tool_span.attributes)
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "get_usage"
    assert attrs["gen_ai.tool.call.id"] == entries["tool_call.completed"].event(
        ToolCallCompleted).tool_call_id
    assert attrs["gen_ai.tool.call.id"].startswith("call_")  # overt's id, not the model's
    assert attrs["overt.tool_status"] == "ok" and attrs["overt.channel"] == "cli"
    assert attrs["overt.ledger.seq"] == entries["tool_call.completed"].seq
    assert tool_span.status.is_unset and "error.type" not in attrs


def test_spans_are_timed_from_the_entries_and_children_lie_inside_their_turn(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    one_tool_turn(make_runtime)
    spans = exported(ledger, memory)
    entries = {e.kind: e for e in run(ledger.entries())}
    turn = spans[0]
    assert turn.start_time == at_ns(entries["turn.started"].at)
    assert turn.end_time == at_ns(entries["turn.completed"].at)
    tool_span = by_name(spans)["execute_tool get_usage"]
    assert tool_span.start_time == at_ns(entries["tool_call.started"].at)
    assert tool_span.end_time == at_ns(entries["tool_call.completed"].at)
    for span in spans:
        assert turn.start_time <= span.start_time <= span.end_time <= turn.end_time
    first_chat, last_chat = spans[1], spans[3]
    assert first_chat.end_time <= tool_span.start_time <= tool_span.end_time
    assert tool_span.end_time <= last_chat.start_time or tool_span.end_time <= last_chat.end_time


def test_exporting_twice_gives_the_same_trace_and_span_ids(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    one_tool_turn(make_runtime)
    one_tool_turn(make_runtime)
    first = [(s.context.trace_id, s.context.span_id) for s in exported(ledger, memory)]
    again = [(s.context.trace_id, s.context.span_id) for s in exported(ledger, memory)]
    assert first == again
    assert len({trace for trace, _ in first}) == 2


def test_a_refused_tool_call_ends_at_its_record_and_starts_its_duration_before(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    runtime = make_runtime(ScriptedModel(tool_turn("no_such_tool")))
    run(runtime.respond(cli_message()))
    refused = run(ledger.entries(kinds=["tool_call.completed"]))[0]
    span = by_name(exported(ledger, memory))[f"execute_tool {digest_text('no_such_tool')}"]
    assert span.end_time == at_ns(refused.at)
    expected_start = at_ns(refused.at) - round(
        refused.event(ToolCallCompleted).tool_duration_ms * 1_000_000)
    assert span.start_time >= expected_start  # later only if clamped inside the turn
    assert span.attributes["overt.tool_status"] == "unknown_tool"
    assert span.attributes["error.type"] == "unknown_tool"
    assert not span.status.is_ok and not span.status.is_unset


def test_a_model_failure_marks_the_chat_and_turn_spans_with_its_error_type(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    run(make_runtime(ScriptedModel([RuntimeError("provider down")])).respond(cli_message()))
    spans = by_name(exported(ledger, memory))
    assert spans["chat scripted"].attributes["error.type"] == "RuntimeError"
    turn = spans["invoke_agent overt"]
    assert turn.attributes["error.type"] == "RuntimeError"
    assert turn.attributes["overt.turn_status"] == "model_error"


def interrupted_turn(make_runtime: RuntimeFactory) -> None:
    """A turn cancelled inside its tool: the ledger ends at ``tool_call.started``."""

    async def drive() -> None:
        entered = asyncio.Event()

        @tool
        async def hang() -> str:
            """Never returns."""
            entered.set()
            await asyncio.Event().wait()
            return "never"

        runtime = make_runtime(ScriptedModel(tool_turn("hang")), tools=[hang])
        task = asyncio.create_task(runtime.respond(cli_message("stuck")))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(drive())


def test_a_turn_killed_mid_tool_is_exported_ended_at_its_last_entry_as_interrupted(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    interrupted_turn(make_runtime)
    entries = run(ledger.entries())
    assert entries[-1].kind == "tool_call.started"
    spans = exported(ledger, memory)
    assert [s.name for s in spans] == ["invoke_agent overt", "chat scripted", "execute_tool hang"]
    turn, tool_span = spans[0], spans[2]
    assert turn.end_time == at_ns(entries[-1].at) == tool_span.end_time
    for span in (turn, tool_span):
        assert span.attributes["error.type"] == "interrupted"
        assert span.status.description == "interrupted"
    assert tool_span.attributes["overt.tool_status"] == "interrupted"
    assert turn.attributes["overt.turn_status"] == "interrupted"


def test_otel_filters_select_turns_and_export_each_selected_turn_whole(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    one_tool_turn(make_runtime, session="a")
    one_tool_turn(make_runtime, session="b")
    turn_b = run(ledger.entries(session_id="cli:b"))
    b_spans = exported(ledger, memory, session_id="cli:b")
    assert {s.attributes["gen_ai.conversation.id"] for s in b_spans} == {"cli:b"}
    assert len(b_spans) == 4
    # A window holding only the end of turn b still exports all of it.
    late = exported(ledger, memory, since=turn_b[-1].at)
    assert [s.name for s in late] == [s.name for s in b_spans]
    assert late[0].attributes["overt.turn_status"] == "completed"
    assert exported(ledger, memory, until=turn_b[0].at)[0].attributes[
        "gen_ai.conversation.id"] == "cli:a"
    assert exported(ledger, memory, session_id="cli:nobody") == []


def test_no_exported_line_or_span_carries_message_text_or_tool_arguments(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    runtime = make_runtime(ScriptedModel(tool_turn("echo", text=SECRET)), tools=[echo])
    run(runtime.respond(cli_message(f"please echo {SECRET}")))
    interrupted_turn(make_runtime)
    started = run(ledger.entries())[1].event(TurnStarted)
    assert SECRET in (run(ledger.content(started.message_digest)) or "")
    out = io.StringIO()
    run(export_jsonl(ledger, out))
    assert SECRET not in out.getvalue()
    spans = exported(ledger, memory)
    assert len(spans) == 7
    for span in spans:
        assert SECRET not in span_json(span)
        for key in span.attributes:
            assert not any(word in key for word in CONTENT_WORDS), key
            assert not key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.prompt"))


def test_spans_from_entries_skip_entries_outside_turns(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    one_tool_turn(make_runtime)
    entries = run(ledger.entries())
    assert entries[0].kind == "runtime.started"
    spans = spans_from_entries(reversed(entries))  # order does not matter: seq does
    assert [s.name for s in spans] == [s.name for s in run(otel_spans(ledger))]


# -- exporters ------------------------------------------------------------------

def test_export_otel_counts_turns_and_spans_and_the_spans_a_failing_exporter_refused(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    one_tool_turn(make_runtime)
    one_tool_turn(make_runtime)
    result = run(export_otel(ledger, memory, batch_size=3))
    assert (result.turns, result.spans, result.failed) == (2, 8, 0)
    memory.shutdown()  # a shut-down in-memory exporter refuses every batch
    refused = run(export_otel(ledger, memory, batch_size=3))
    assert (refused.spans, refused.failed) == (0, 8)


def test_the_file_exporter_writes_one_json_span_per_line(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, tmp_path: Path, memory: Any
) -> None:
    one_tool_turn(make_runtime)
    path = tmp_path / "spans.jsonl"
    exporter = make_span_exporter("file", output=path)
    run(export_otel(ledger, exporter))
    exporter.shutdown()
    spans = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(spans) == 4 and spans[0]["name"] == "invoke_agent overt"
    assert spans[1]["parent_id"] == spans[0]["context"]["span_id"]


def test_the_console_exporter_prints_to_the_given_stream(memory: Any) -> None:
    out = io.StringIO()
    exporter = make_span_exporter("console", out=out)
    exporter.export([])
    assert out.getvalue() == ""


def test_an_unknown_exporter_or_a_file_exporter_without_a_path_is_a_usage_error(
    memory: Any,
) -> None:
    with pytest.raises(UsageError, match="unknown span exporter"):
        make_span_exporter("zipkin")
    with pytest.raises(UsageError, match="output path"):
        make_span_exporter("file")


def test_missing_otel_packages_raise_an_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, ledger: SqliteLedger, memory: Any
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter",
                        None)
    with pytest.raises(ExtraMissingError) as missing:
        make_span_exporter("otlp", endpoint="http://localhost:4318/v1/traces")
    assert missing.value.extra == "otel"
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ExtraMissingError, match=r"overt\[otel\]"):
        run(otel_spans(ledger))


def test_spans_are_sent_as_otlp_protobuf_to_the_given_endpoint(
    make_runtime: RuntimeFactory, ledger: SqliteLedger, memory: Any
) -> None:
    needs.module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        one_tool_turn(make_runtime)
        endpoint = f"http://127.0.0.1:{server.server_port}/v1/traces"
        exporter = make_span_exporter("otlp", endpoint=endpoint)
        result = run(export_otel(ledger, exporter))
        exporter.shutdown()
    finally:
        server.shutdown()
        server.server_close()
    assert (result.spans, result.failed) == (4, 0)
    [(path, body)] = received
    request = ExportTraceServiceRequest.FromString(body)
    [resource_spans] = request.resource_spans
    names = [span.name for scope in resource_spans.scope_spans for span in scope.spans]
    assert path == "/v1/traces" and names[0] == "invoke_agent overt" and len(names) == 4


def test_what_a_plugin_did_is_an_event_on_its_turns_span_without_digests(
    ledger: Any, memory: Any
) -> None:
    from overt.events import HookBlocked

    # a turn with a plugin's block inside it, in the order the engine records them
    started, completed = _turn_events("T-hook")
    run(ledger.record([started, HookBlocked(
        turn_id="T-hook", session_id="S", plugin="example", hook="pre_tool_call",
        tool_call_id="c9", tool_name="get_usage", reason_code="usage_history_blocked"),
        completed]))
    (span,) = [s for s in exported(ledger, memory) if s.name.startswith("invoke_agent")]
    (event,) = span.events
    assert event.name == "hook.blocked"
    assert event.attributes["overt.hook.plugin"] == "example"
    assert event.attributes["overt.hook.hook"] == "pre_tool_call"
    assert event.attributes["overt.reason_code"] == "usage_history_blocked"
    assert not any("digest" in key for key in event.attributes)


def _turn_events(turn_id: str) -> list[Any]:
    from overt.events import TurnCompleted, TurnStarted

    return [
        TurnStarted(turn_id=turn_id, session_id="S", source="cli", caller_session_id="cli:S",
                    message_digest="sha256:" + "0" * 64, model="scripted", route="default",
                    max_tool_calls=5, actor="operator:default"),
        TurnCompleted(turn_id=turn_id, session_id="S", status="completed", reply_digest=None,
                      tools_used=[], tool_calls=0, model_calls=1, input_tokens=1,
                      output_tokens=1, cost_usd=0.0, duration_ms=1.0),
    ]
