"""The Anthropic adapter, with the real SDK, against a local server speaking the Messages API.

The server (stdlib ``http.server`` on 127.0.0.1, a random port) answers from a
script, in the documented wire format: message JSON, error JSON
(``{"type": "error", "error": {...}}``) with ``request-id`` and
``retry-after-ms`` headers, and server-sent events for streams. It records every
request body it received, so the tests read what the SDK actually sent.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from overt.errors import ConfigError, ExtraMissingError, ModelError, UsageError
from overt.models.anthropic import AnthropicAPIError, AnthropicModel, build
from overt.models.options import ModelOptions
from overt.models.resolve import ModelCatalog, builtin_providers
from overt.tools.builtin import builtin_tools
from overt.types import Message, ModelRequest, ToolCall, ToolSpec
from tests.conftest import RuntimeFactory, cli_message, run

KEY = "sk-ant-test-0123456789-SECRET"
MODEL = "claude-test-1"


class Reply:
    """One scripted answer: a status, headers and a body (JSON, or raw SSE text)."""

    def __init__(self, body: Mapping[str, Any] | str, status: int = 200,
                 headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.headers = {"request-id": "req_test", **(headers or {})}
        if isinstance(body, str):
            self.data = body.encode()
            self.headers.setdefault("content-type", "text/event-stream")
        else:
            self.data = json.dumps(body).encode()
            self.headers.setdefault("content-type", "application/json")


class FakeAnthropic:
    """A local HTTP server that plays back replies and records the requests."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[dict[str, Any]] = []
        self.headers: list[Mapping[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                fake.received.append({"path": self.path, **json.loads(body)})
                fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = fake.replies.popleft() if fake.replies else error(
                    500, "api_error", "no scripted reply left")
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(reply.data)))
                self.end_headers()
                self.wfile.write(reply.data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,),
                                       daemon=True)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def model(api: FakeAnthropic, **options: Any) -> AnthropicModel:
    return AnthropicModel(MODEL, api_key=KEY, base_url=api.url, **options)


def message(*content: Mapping[str, Any], stop_reason: str = "end_turn",
            stop_sequence: str | None = None, **usage: int) -> dict[str, Any]:
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "content": list(content),
        "model": f"{MODEL}-20990101", "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {"input_tokens": 12, "output_tokens": 5, **usage},
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def thinking(value: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def error(status: int, kind: str, detail: str, **headers: str) -> Reply:
    return Reply({"type": "error", "error": {"type": kind, "message": detail}}, status,
                 {"request-id": f"req_{status}", **headers})


def ask(text_: str = "hi", system: str = "be brief", **options: Any) -> ModelRequest:
    return ModelRequest((Message("system", system), Message("user", text_)), **options)


WEATHER = ToolSpec("get_weather", "The weather in a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]})


# -- requests and replies -------------------------------------------------------


@pytest.mark.slow
def test_a_plain_answer_arrives_as_text_with_its_usage_and_identifiers(
        api: FakeAnthropic) -> None:
    api.script(Reply(message(text("Hello"), text(" there.")), headers={"request-id": "req_9"}))
    response = run(model(api).complete(ask()))
    assert response.text == "Hello there."
    assert response.tool_calls == () and response.reasoning == ""
    assert response.model == f"anthropic:{MODEL}" and response.stop_reason == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 5)
    assert response.usage.cost_usd == 0.0
    info = response.info
    assert info["request_id"] == "req_9" and info["message_id"] == "msg_01"
    assert info["api_model"] == f"{MODEL}-20990101" and info["attempts"] == 1
    assert info["max_tokens"] == 1024 and "stop_sequence" not in info
    sent, = api.received
    assert sent["path"] == "/v1/messages"
    assert sent["model"] == MODEL and sent["max_tokens"] == 1024
    assert sent["system"] == "be brief"
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in sent and "thinking" not in sent and "temperature" not in sent
    headers = api.headers[0]  # the SDK chooses the header the key travels in
    assert KEY in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix(
        "Bearer ")) and headers["anthropic-version"]


def test_a_tool_use_reply_becomes_tool_calls_and_the_next_request_pairs_the_results(
        api: FakeAnthropic) -> None:
    api.script(
        Reply(message(text("Checking."), tool_use("toolu_1", "get_weather", city="Oslo"),
                      tool_use("toolu_2", "get_weather", city="Lima"), stop_reason="tool_use")),
        Reply(message(text("Oslo is cold."))),
    )
    claude = model(api, temperature=0.2)
    first = run(claude.complete(ask("weather?", tools=(WEATHER,))))
    assert first.stop_reason == "tool_use" and first.text == "Checking."
    assert first.tool_calls == (ToolCall("toolu_1", "get_weather", {"city": "Oslo"}),
                                ToolCall("toolu_2", "get_weather", {"city": "Lima"}))
    follow_up = ModelRequest((
        Message("system", "be brief"), Message("user", "weather?"),
        Message("assistant", first.text, tool_calls=first.tool_calls),
        Message("tool", "-3C", tool_call_id="toolu_1", name="get_weather"),
        Message("tool", "TimeoutError: no answer", tool_call_id="toolu_2", name="get_weather",
                is_error=True),
    ), tools=(WEATHER,))
    second = run(claude.complete(follow_up))
    assert second.text == "Oslo is cold." and second.tool_calls == ()
    one, two = api.received
    assert one["tools"] == [{"name": "get_weather", "description": "The weather in a city.",
                             "input_schema": dict(WEATHER.input_schema)}]
    assert one["temperature"] == 0.2 and second.info["temperature"] == 0.2
    assert [m["role"] for m in two["messages"]] == ["user", "assistant", "user"]
    assert two["messages"][1]["content"] == [
        text("Checking."), tool_use("toolu_1", "get_weather", city="Oslo"),
        tool_use("toolu_2", "get_weather", city="Lima")]
    assert two["messages"][2]["content"] == [  # both results in one user message
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3C", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "TimeoutError: no answer",
         "is_error": True}]


def test_thinking_blocks_become_the_reasoning_and_go_back_verbatim_with_the_tool_results(
        api: FakeAnthropic) -> None:
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    api.script(
        Reply(message(thinking("The user wants Oslo.", "sig-1"), redacted,
                      tool_use("toolu_1", "get_weather", city="Oslo"), stop_reason="tool_use",
                      output_tokens=300)),
        Reply(message(thinking("It is cold.", "sig-2"), text("Cold."))),
    )
    claude = model(api, thinking={"type": "enabled", "budget_tokens": 2048}, max_tokens=4096)
    first = run(claude.complete(ask("weather?", tools=(WEATHER,))))
    assert first.reasoning == "The user wants Oslo." and first.text == ""
    assert first.usage.output_tokens == 300
    assert first.info["thinking_blocks"] == 1 and first.info["redacted_thinking_blocks"] == 1
    assert first.info["thinking_budget_tokens"] == 2048
    second = run(claude.complete(ModelRequest((
        Message("user", "weather?"),
        Message("assistant", first.text, tool_calls=first.tool_calls),
        Message("tool", "-3C", tool_call_id="toolu_1")), tools=(WEATHER,))))
    assert (second.reasoning, second.text) == ("It is cold.", "Cold.")
    one, two = api.received
    assert one["thinking"] == two["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert two["messages"][1] == {"role": "assistant", "content": [
        thinking("The user wants Oslo.", "sig-1"), redacted,
        tool_use("toolu_1", "get_weather", city="Oslo")]}
    recorded = json.dumps([first.info, second.info])  # ids and numbers only, never content
    assert "Oslo" not in recorded and "cold" not in recorded and "sig-" not in recorded


def test_thinking_is_left_off_when_an_open_tool_turn_has_no_thinking_blocks_to_send_back(
        api: FakeAnthropic) -> None:
    api.script(Reply(message(text("Cold."))))
    claude = model(api, thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=512)
    response = run(claude.complete(ModelRequest((  # a tool round another model started
        Message("user", "weather?"),
        Message("assistant", "", tool_calls=(ToolCall("call_7", "get_weather", {}),)),
        Message("tool", "-3C", tool_call_id="call_7")))))
    sent, = api.received
    assert "thinking" not in sent and response.info["thinking_omitted"] is True
    assert sent["max_tokens"] == 512


def test_a_limit_no_larger_than_the_thinking_budget_is_raised_by_the_budget(
        api: FakeAnthropic) -> None:
    api.script(Reply(message(text("ok"))))
    claude = model(api, thinking={"type": "enabled", "budget_tokens": 1024})
    run(claude.complete(ask(max_output_tokens=300)))
    assert api.received[0]["max_tokens"] == 1324


@pytest.mark.slow
@pytest.mark.parametrize(("stop_reason", "stop_sequence"), [
    ("max_tokens", None), ("stop_sequence", "###"), ("refusal", None),
    ("model_context_window_exceeded", None), ("pause_turn", None)])
def test_stop_reasons_are_kept_as_the_api_names_them(
        api: FakeAnthropic, stop_reason: str, stop_sequence: str | None) -> None:
    api.script(Reply(message(text("partial"), stop_reason=stop_reason,
                             stop_sequence=stop_sequence)))
    response = run(model(api).complete(ask()))
    assert response.stop_reason == stop_reason
    assert response.info.get("stop_sequence") == stop_sequence


def test_cache_tokens_go_into_info_and_priced_models_cost_money(api: FakeAnthropic) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 200, "cache_creation_input_tokens": 4000,
             "cache_read_input_tokens": 10000}
    api.script(Reply(message(text("ok"), **usage)), Reply(message(text("ok"), **usage)))
    free = run(model(api).complete(ask()))
    assert free.info["cache_creation_input_tokens"] == 4000
    assert free.info["cache_read_input_tokens"] == 10000
    assert free.usage.input_tokens == 1000 and free.usage.cost_usd == 0.0
    priced = run(model(api, prices={MODEL: (3.0, 15.0)}).complete(ask()))
    # 1000*3 + 200*15 + 4000*3*1.25 + 10000*3*0.1, per million
    assert priced.usage.cost_usd == pytest.approx(0.024)


# -- retries ----------------------------------------------------------------------


# The SDK retries; each error asks for a 1 ms wait (retry-after-ms), which it honours.
SOON = {"retry-after-ms": "1"}


def test_a_429_a_529_and_a_500_are_retried_by_the_sdk(api: FakeAnthropic) -> None:
    api.script(error(429, "rate_limit_error", "Number of requests exceeded", **SOON),
               error(529, "overloaded_error", "Overloaded", **SOON),
               error(500, "api_error", "Internal server error", **SOON),
               Reply(message(text("ok"))))
    response = run(model(api, max_retries=3).complete(ask()))
    assert response.text == "ok" and response.info["attempts"] == 4
    assert [h["x-stainless-retry-count"] for h in api.headers] == ["0", "1", "2", "3"]
    assert len({json.dumps(body, sort_keys=True) for body in api.received}) == 1


def test_retries_are_bounded_and_end_in_a_clear_model_error(api: FakeAnthropic) -> None:
    api.script(*[error(529, "overloaded_error", "Overloaded", **SOON)] * 3)
    with pytest.raises(AnthropicAPIError) as caught:
        run(model(api, max_retries=2).complete(ask()))
    exc = caught.value
    assert isinstance(exc, ModelError) and len(api.received) == 3
    assert (exc.status, exc.error_type, exc.attempts) == (529, "overloaded_error", 3)
    assert str(exc) == (f"anthropic:{MODEL}: HTTP 529 overloaded_error: Overloaded "
                        "(request req_529); after 3 attempts")


def test_no_retries_are_made_when_max_retries_is_zero(api: FakeAnthropic) -> None:
    api.script(error(429, "rate_limit_error", "slow down", **SOON))
    with pytest.raises(AnthropicAPIError, match="not retried") as caught:
        run(model(api, max_retries=0).complete(ask()))
    assert caught.value.attempts == 1 and len(api.received) == 1


def test_a_response_that_says_do_not_retry_is_not_retried(api: FakeAnthropic) -> None:
    api.script(error(529, "overloaded_error", "Overloaded", **{"x-should-retry": "false"}))
    with pytest.raises(AnthropicAPIError):
        run(model(api).complete(ask()))
    assert len(api.received) == 1


def test_a_refused_connection_is_retried_then_ends_in_a_clear_model_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    claude = AnthropicModel(MODEL, api_key=KEY, base_url=f"http://127.0.0.1:{port}",
                            max_retries=1)
    with pytest.raises(AnthropicAPIError) as caught:
        run(claude.complete(ask()))
    exc = caught.value
    assert exc.attempts == 2 and (exc.status, exc.error_type) == (None, "connection_error")
    assert f"127.0.0.1:{port}" in str(exc) and "after 2 attempts" in str(exc)
    assert KEY not in str(exc)


@pytest.mark.slow
@pytest.mark.parametrize(("status", "kind", "detail", "hint"), [
    (400, "invalid_request_error", "messages: text content blocks must be non-empty",
     "malformed"),
    (401, "authentication_error", "invalid x-api-key", "ANTHROPIC_API_KEY"),
    (403, "permission_error", "Your API key does not have permission", "may not use"),
    (404, "not_found_error", f"model: {MODEL}", "model name"),
])
def test_client_errors_are_not_retried_and_name_status_type_and_message(
        api: FakeAnthropic, status: int, kind: str, detail: str, hint: str) -> None:
    api.script(error(status, kind, detail))
    with pytest.raises(AnthropicAPIError) as caught:
        run(model(api).complete(ask()))
    exc = caught.value
    assert len(api.received) == 1 and exc.attempts == 1
    assert (exc.status, exc.error_type, exc.request_id) == (status, kind, f"req_{status}")
    assert f"HTTP {status} {kind}: {detail}" in str(exc) and "not retried" in str(exc)
    assert hint in str(exc) and KEY not in str(exc) and KEY not in repr(exc)


def test_an_api_message_that_echoes_the_key_is_scrubbed(api: FakeAnthropic) -> None:
    api.script(error(401, "authentication_error", f"invalid x-api-key {KEY}"))
    with pytest.raises(AnthropicAPIError) as caught:
        run(model(api).complete(ask()))
    assert KEY not in str(caught.value) and "[api key]" in str(caught.value)


# -- streaming ----------------------------------------------------------------------


def sse(*events: Mapping[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def streamed_tool_call() -> str:
    start = message(stop_reason="", input_tokens=40, output_tokens=1)
    start["stop_reason"] = None
    return sse(
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "Oslo, "}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "then."}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": "sig-s"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "ping"},
        {"type": "content_block_start", "index": 1, "content_block": text("")},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "text_delta", "text": "Let me "}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "text_delta", "text": "check."}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": "toolu_s", "name": "get_weather",
                           "input": {}}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "input_json_delta", "partial_json": '{"city": '}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "input_json_delta", "partial_json": '"Oslo"}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 77}},
        {"type": "message_stop"},
    )


def test_a_streamed_reply_in_the_sse_event_format_reads_like_a_whole_one(
        api: FakeAnthropic) -> None:
    api.script(Reply(streamed_tool_call(), headers={"request-id": "req_s"}))
    claude = model(api, stream=True, thinking={"type": "enabled", "budget_tokens": 1024},
                   max_tokens=2048)
    response = run(claude.complete(ask("weather?", tools=(WEATHER,))))
    assert response.text == "Let me check." and response.reasoning == "Oslo, then."
    assert response.tool_calls == (ToolCall("toolu_s", "get_weather", {"city": "Oslo"}),)
    assert response.stop_reason == "tool_use"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 77)
    assert response.info["request_id"] == "req_s"
    assert api.received[0]["stream"] is True


def test_an_error_event_inside_a_stream_is_a_model_error_and_not_retried(
        api: FakeAnthropic) -> None:
    start = message()
    broken = sse({"type": "message_start", "message": {**start, "content": []}},
                 {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    api.script(Reply(broken), Reply(streamed_tool_call()))
    with pytest.raises(AnthropicAPIError, match="in the stream: overloaded_error") as caught:
        run(model(api, stream=True).complete(ask()))
    assert caught.value.error_type == "overloaded_error" and len(api.received) == 1


def test_a_streamed_reply_after_a_429_counts_its_attempts(api: FakeAnthropic) -> None:
    api.script(error(429, "rate_limit_error", "slow down", **SOON),
               Reply(streamed_tool_call()))
    response = run(model(api, stream=True).complete(ask()))
    assert response.info["attempts"] == 2 and response.text == "Let me check."


def test_complete_stream_sends_the_text_deltas_and_not_the_thinking_or_tool_input(
        api: FakeAnthropic) -> None:
    api.script(Reply(streamed_tool_call()))
    pieces: list[str] = []
    claude = model(api, thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2048)
    response = run(claude.complete_stream(ask("weather?", tools=(WEATHER,)), pieces.append))
    assert pieces == ["Let me ", "check."]  # not "Oslo, then.", not the input JSON
    assert "".join(pieces) == response.text
    assert response.tool_calls == (ToolCall("toolu_s", "get_weather", {"city": "Oslo"}),)
    assert api.received[0]["stream"] is True  # streamed though the model's stream is off


# -- building the model -------------------------------------------------------------


def test_the_provider_builds_the_model_from_its_settings(api: FakeAnthropic) -> None:
    options = ModelOptions(provider_settings={"anthropic": {
        "api_key": KEY, "base_url": api.url, "max_tokens": 64, "max_retries": 0,
        "timeout_s": 5}})
    built = ModelCatalog(builtin_providers(), options=options).get(f"anthropic:{MODEL}")
    assert isinstance(built, AnthropicModel) and built.name == f"anthropic:{MODEL}"
    api.script(Reply(message(text("ok"))))
    assert run(built.complete(ask())).text == "ok"
    assert api.received[0]["max_tokens"] == 64
    assert KEY not in repr(built)


def test_the_provider_never_reads_the_key_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with pytest.raises(ConfigError, match="needs an API key"):
        build(MODEL, ModelOptions())


def test_a_missing_key_names_the_variable_the_config_file_points_at() -> None:
    settings = {"anthropic": {"api_key_env": "TEAM_CLAUDE_KEY"}}
    with pytest.raises(ConfigError, match="set TEAM_CLAUDE_KEY"):
        build(MODEL, ModelOptions(provider_settings=settings))


@pytest.mark.parametrize(("settings", "error_type", "match"), [
    ({"api_key": KEY, "max_token": 5}, ConfigError, "unknown anthropic settings"),
    ({"api_key": KEY, "max_tokens": "5"}, ConfigError, "max_tokens must be int"),
    ({"api_key": KEY, "max_retries": True}, ConfigError, "max_retries must be int"),
    ({"api_key": KEY, "thinking": {"type": "enabled"}}, ConfigError, "budget_tokens"),
])
def test_bad_settings_are_config_errors_that_name_the_setting(
        settings: dict[str, Any], error_type: type[Exception], match: str) -> None:
    with pytest.raises(error_type, match=match):
        build(MODEL, ModelOptions(provider_settings={"anthropic": settings}))


def test_a_spec_without_a_model_name_says_how_to_name_one() -> None:
    with pytest.raises(UsageError, match="anthropic:MODEL"):
        build("", ModelOptions(provider_settings={"anthropic": {"api_key": KEY}}))


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ExtraMissingError) as caught:
        AnthropicModel(MODEL, api_key=KEY)
    assert caught.value.extra == "anthropic" and "overt[anthropic]" in str(caught.value)


# -- a whole turn ---------------------------------------------------------------------


def test_an_overt_turn_on_anthropic_records_two_inferences_with_their_tokens(
        api: FakeAnthropic, make_runtime: RuntimeFactory, ledger: Any) -> None:
    api.script(
        Reply(message(text("Let me look."), tool_use("toolu_u", "get_usage", period="today"),
                      stop_reason="tool_use", input_tokens=100, output_tokens=20)),
        Reply(message(text("You used 120 tokens."), input_tokens=180, output_tokens=9)),
    )
    claude = model(api, prices={MODEL: (3.0, 15.0)})
    runtime = make_runtime(claude, tools=builtin_tools())
    result = run(runtime.respond(cli_message("what's my burn?")))
    assert result.error is None and result.text == "You used 120 tokens."
    assert result.tools_used == ["get_usage"]
    inferences = [e.data for e in run(ledger.entries(kinds=["inference"]))]
    assert [(d["model"], d["input_tokens"], d["output_tokens"], d["stop_reason"])
            for d in inferences] == [(f"anthropic:{MODEL}", 100, 20, "tool_use"),
                                     (f"anthropic:{MODEL}", 180, 9, "end_turn")]
    assert [d["cost_usd"] for d in inferences] == pytest.approx([0.0006, 0.000675])
    assert inferences[0]["info"]["request_id"] == "req_test"
    assert result.usage.input_tokens == 280 and result.usage.output_tokens == 29
    second = api.received[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    # overt's own call id stands in for the model's, in the history sent back too
    (call_id,) = [e.data["tool_call_id"] for e in run(ledger.entries(
        kinds=["tool_call.completed"]))]
    assert call_id.startswith("call_")
    assert second[1]["content"][1] == tool_use(call_id, "get_usage", period="today")
    usage_result, = second[2]["content"]
    assert usage_result["tool_use_id"] == call_id and usage_result["is_error"] is False
    assert json.loads(usage_result["content"])["total_input_tokens"] == 100
    assert "get_usage" in [t["name"] for t in api.received[0]["tools"]]
    assert api.received[0]["system"]  # overt's system prompt went as the system parameter
    assert run(ledger.verify()).ok


def test_the_recorded_request_of_each_inference_is_the_body_the_server_received(
        api: FakeAnthropic, make_runtime: RuntimeFactory, ledger: Any) -> None:
    from overt.engine.request_body import expand

    api.script(
        Reply(message(text("Let me look."), tool_use("toolu_u", "get_usage", period="today"),
                      stop_reason="tool_use", input_tokens=100, output_tokens=20)),
        Reply(message(text("You used 120 tokens."), input_tokens=180, output_tokens=9)),
    )
    runtime = make_runtime(model(api, temperature=0.3), tools=builtin_tools())
    run(runtime.respond(cli_message("what's my burn?")))
    entries = run(ledger.entries(kinds=["inference"]))
    assert len(entries) == 2 == len(api.received)
    for entry, received in zip(entries, api.received, strict=True):
        body = run(ledger.content(entry.data["request_digest"], seq=entry.seq))
        sent = run(expand(body, ledger.content))["sent"]
        extra = sent.pop("extra_body")  # the SDK merges it into the body it sends
        assert {**sent, **extra} == {k: v for k, v in received.items() if k != "path"}
