"""The OpenAI-compatible adapter, with the real SDK against real servers.

Two servers. A tiny stdlib HTTP server that answers in the chat completions
wire format (scripted replies, error statuses, broken tool calls) checks the
mapping and the failures in milliseconds. llama-cpp-python's own
OpenAI-compatible server (``python -m llama_cpp.server``), serving the
embedded model on 127.0.0.1 and started once for the module, checks the whole
path: a plain answer, a tool call, an overt turn on both ledgers, and
``overt ask --model openai:NAME``, hence ``real_model``. Every request that
offers tools starts with the same ~850 tokens (system prompt and tools) and
the server keeps its states (``--cache``), so they are prefilled once (a prompt
changed between requests would be prefilled again on each, many times slower).

The server runs the GGUF's own chat template (no ``--chat_format``): the
Qwen2.5 template lists the tools in the system turn, the model writes its call
as JSON in ``content``, and the adapter lifts it out (the server parses calls
only when ``tool_choice`` names one function). ``chatml-function-calling``,
which would return structured ``tool_calls``, made this 0.5B model answer all
three tool questions tried with invented numbers and no call.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from overt.errors import ConfigError, ExtraMissingError, ModelError, ModelOutputError, UsageError
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.models.openai_compat import (
    NO_KEY,
    OpenAICompatModel,
    from_wire_tool_calls,
    to_wire_messages,
)
from overt.models.options import ModelOptions
from overt.models.resolve import ModelCatalog, builtin_providers
from overt.prompts import load_template, render
from overt.tools.builtin import builtin_tools
from overt.types import Message, ModelRequest, ModelResponse, ResponseResult, ToolCall, ToolSpec
from tests import needs
from tests.conftest import RuntimeFactory, cli_message, run

needs.module("openai", reason="the openai SDK is not installed: pip install 'overt[openai]'")

WEATHER = ToolSpec("get_weather", "The weather in a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]})
KEY = "sk-test-0123456789abcdefSECRET"


# -- a tiny chat completions server ----------------------------------------------


class Wire:
    """Replies to serve, in order, and the requests received."""

    def __init__(self) -> None:
        self.replies: deque[tuple[int, dict[str, Any], dict[str, str]]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    def reply(self, body: dict[str, Any], status: int = 200, **headers: str) -> None:
        self.replies.append((status, body, headers))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    server: Any

    def do_POST(self) -> None:
        wire: Wire = self.server.wire
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        headers = {name.lower(): value for name, value in self.headers.items()}
        wire.requests.append({"path": self.path, "headers": headers, "body": body})
        status, payload, headers = (wire.replies.popleft() if wire.replies else
                                    (500, {"error": {"message": "no reply scripted"}}, {}))
        kind = "application/json"
        if "stream_chunks" in payload:  # a streamed reply: Server-Sent Events, as servers send
            kind = "text/event-stream"
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in payload["stream_chunks"]
                           ).encode() + b"data: [DONE]\n\n"
        else:
            data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


@pytest.fixture(scope="module")
def wire_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def wire(wire_server: ThreadingHTTPServer) -> Wire:
    state = Wire()
    state.url = f"http://127.0.0.1:{wire_server.server_address[1]}/v1"
    wire_server.wire = state  # type: ignore[attr-defined]
    return state


def completion(content: str | None = "", *, tool_calls: list[dict[str, Any]] | None = None,
               finish: str = "stop", usage: tuple[int, int] = (12, 5),
               **message: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {"id": "chatcmpl-42", "object": "chat.completion", "created": 1_700_000_000,
            "model": "served-model-7", "system_fingerprint": "fp_abc",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": sum(usage)}}


def function_call(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def ask(model: OpenAICompatModel, *messages: Message,
        tools: tuple[ToolSpec, ...] = ()) -> ModelResponse:
    """One request in its own event loop, the model's client closed before the loop is."""
    async def once() -> ModelResponse:
        try:
            return await model.complete(ModelRequest(messages, tools))
        finally:
            await model.aclose()

    return asyncio.run(once())


def model_for(wire: Wire, **options: Any) -> OpenAICompatModel:
    return OpenAICompatModel("gpt-test", base_url=wire.url, **{"max_retries": 0, **options})


# -- mapping -----------------------------------------------------------------------


def test_messages_and_tools_reach_the_server_in_the_chat_completions_shape(wire: Wire) -> None:
    wire.reply(completion("sunny"))
    call = ToolCall("call_7", "get_weather", {"city": "Oslo"})
    model = model_for(wire, temperature=0.0, seed=3, max_tokens=99)
    ask(model, Message("system", "be brief"), Message("user", "weather?"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", '{"sky": "clear"}', tool_call_id="call_7", name="get_weather"),
        tools=(WEATHER,))
    (sent,) = wire.requests
    assert sent["path"] == "/v1/chat/completions"
    body = sent["body"]
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_7", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_7", "content": '{"sky": "clear"}'},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": dict(WEATHER.input_schema)}}]
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.0, 3, 99)


def test_unset_sampling_options_are_not_sent(wire: Wire) -> None:
    wire.reply(completion("hi"))
    ask(model_for(wire), Message("user", "hi"))
    assert set(wire.requests[0]["body"]) == {"model", "messages"}


def test_a_malformed_call_in_history_is_sent_under_a_name_the_api_accepts() -> None:
    broken = ToolCall("call_x", "", {}, malformed="invalid JSON")
    invented = ToolCall("call_y", "get weather!", {})
    (assistant,) = to_wire_messages([Message("assistant", "", tool_calls=(broken, invented))])
    names = [c["function"]["name"] for c in assistant["tool_calls"]]
    assert names == ["unnamed_tool", "get_weather_"]


def test_a_tool_message_without_a_call_id_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="tool_call_id"):
        to_wire_messages([Message("tool", "42")])


def test_structured_tool_calls_become_tool_calls_with_decoded_arguments(wire: Wire) -> None:
    wire.reply(completion(None, finish="tool_calls", tool_calls=[
        function_call("get_weather", '{"city": "Oslo"}', "call_a"),
        function_call("get_weather", "", "call_b")]))
    response = ask(model_for(wire), Message("user", "weather?"), tools=(WEATHER,))
    assert response.tool_calls == (ToolCall("call_a", "get_weather", {"city": "Oslo"}),
                                   ToolCall("call_b", "get_weather", {}))
    assert response.text == "" and response.stop_reason == "tool_use"
    assert response.model == "openai:gpt-test"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 5)
    assert response.usage.cost_usd == 0.0
    assert response.info["response_id"] == "chatcmpl-42"
    assert response.info["served_model"] == "served-model-7"
    assert response.info["system_fingerprint"] == "fp_abc"
    assert response.info["tool_calls_from"] == "structured"
    assert response.info["endpoint"] == wire.url


@pytest.mark.parametrize(("arguments", "reason"), [
    ('{"city": "Oslo"', "not valid JSON"),
    ('["Oslo"]', "must be a JSON object, got list"),
    ('{"temp": NaN}', "not valid JSON"),
    ('{"a": 1} {"b": 2}', "not valid JSON"),
])
def test_arguments_that_are_not_one_json_object_give_a_malformed_call_not_an_exception(
    wire: Wire, arguments: str, reason: str,
) -> None:
    wire.reply(completion(None, finish="tool_calls",
                          tool_calls=[function_call("get_weather", arguments)]))
    (call,) = ask(model_for(wire), Message("user", "weather?"), tools=(WEATHER,)).tool_calls
    assert call.id == "call_1" and call.name == "get_weather" and call.arguments == {}
    assert call.malformed is not None and reason in call.malformed


def test_tool_calls_without_a_name_or_of_another_type_are_malformed() -> None:
    calls = from_wire_tool_calls([
        {"id": "c1", "type": "function", "function": {"name": "", "arguments": "{}"}},
        {"id": "c2", "type": "custom", "custom": {"name": "x", "input": "y"}},
    ])
    assert [(c.id, c.name, c.malformed) for c in calls] == [
        ("c1", "", "tool call has no function name"),
        ("c2", "", "unsupported tool call type 'custom'"),
    ]


@pytest.mark.parametrize("content", [
    '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```',
])
def test_a_tool_call_written_as_json_in_content_becomes_a_tool_call(
    wire: Wire, content: str,
) -> None:
    wire.reply(completion(content))
    response = ask(model_for(wire), Message("user", "weather?"), tools=(WEATHER,))
    (call,) = response.tool_calls
    assert (call.name, call.arguments, call.malformed) == ("get_weather", {"city": "Oslo"}, None)
    assert response.text == "" and response.stop_reason == "tool_use"
    assert response.info["tool_calls_from"] == "content"


def test_json_in_content_is_the_answer_when_no_tools_were_offered(wire: Wire) -> None:
    content = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    wire.reply(completion(content))
    response = ask(model_for(wire), Message("user", "show me a call"))
    assert response.text == content and response.tool_calls == ()
    assert response.stop_reason == "end_turn"


@pytest.mark.parametrize(("finish", "stop"), [
    ("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "content_filter"),
])
def test_finish_reasons_become_overt_stop_reasons(wire: Wire, finish: str, stop: str) -> None:
    wire.reply(completion("partial", finish=finish))
    assert ask(model_for(wire), Message("user", "q")).stop_reason == stop


def test_reasoning_is_kept_apart_from_the_answer_and_info_holds_no_content(wire: Wire) -> None:
    wire.reply(completion("<think>add them</think>4", reasoning_content="two and two"))
    response = ask(model_for(wire), Message("user", "2+2?"))
    assert response.text == "4"
    assert response.reasoning == "two and two\n\nadd them"
    flat = json.dumps(response.info)
    assert "add them" not in flat and "two and two" not in flat and '"4"' not in flat


def test_cost_comes_from_the_price_of_the_model(wire: Wire) -> None:
    wire.reply(completion("ok", usage=(1_000_000, 500_000)))
    wire.reply(completion("ok", usage=(1_000, 1_000)))
    priced = model_for(wire, prices={"gpt-test": (0.15, 0.6)})
    assert ask(priced, Message("user", "q")).usage.cost_usd == pytest.approx(0.45)
    unpriced = model_for(wire, prices={"other-model": (1.0, 1.0)})
    assert ask(unpriced, Message("user", "q")).usage.cost_usd == 0.0


def test_fold_tool_results_sends_the_answer_turn_as_one_user_message_without_tools(
    wire: Wire,
) -> None:
    wire.reply(completion("It is clear in Oslo."))
    call = ToolCall("call_7", "get_weather", {"city": "Oslo"})
    response = ask(model_for(wire, fold_tool_results=True),
                   Message("system", "be brief"), Message("user", "weather?"),
                   Message("assistant", "", tool_calls=(call,)),
                   Message("tool", '{"sky": "clear"}', tool_call_id="call_7",
                           name="get_weather"), tools=(WEATHER,))
    body = wire.requests[0]["body"]
    assert "tools" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "get_weather returned:\nsky: clear" in body["messages"][1]["content"]
    assert "weather?" in body["messages"][1]["content"]
    assert response.info["folded_tool_results"] is True and response.info["tools_sent"] == 0


def test_one_model_answers_from_two_event_loops(wire: Wire) -> None:
    model = model_for(wire)
    wire.reply(completion("one"))
    wire.reply(completion("two"))
    request = ModelRequest((Message("user", "q"),))
    assert asyncio.run(model.complete(request)).text == "one"
    # a new loop: the first loop's client is dropped, a new one opened
    assert ask(model, Message("user", "q")).text == "two"


def test_aclose_closes_the_client_and_a_later_call_opens_another(wire: Wire) -> None:
    model = model_for(wire)
    wire.reply(completion("one"))
    wire.reply(completion("two"))

    async def both() -> list[str]:
        first = await model.complete(ModelRequest((Message("user", "1"),)))
        await model.aclose()
        second = await model.complete(ModelRequest((Message("user", "2"),)))
        await model.aclose()
        return [first.text, second.text]

    assert asyncio.run(both()) == ["one", "two"]


# -- failures ----------------------------------------------------------------------


@pytest.mark.parametrize(("status", "message"), [
    (400, "Invalid value for 'tools[0].function.name'"),
    (401, f"Incorrect API key provided: {KEY}."),
    (404, "The model `gpt-test` does not exist or you do not have access to it."),
])
def test_a_refused_request_is_a_model_error_naming_the_status_and_never_the_key(
    wire: Wire, status: int, message: str,
) -> None:
    wire.reply({"error": {"message": message, "type": "invalid_request_error"}}, status)
    model = model_for(wire, api_key=KEY, max_retries=2)
    with pytest.raises(ModelError, match=f"HTTP {status}") as caught:
        ask(model, Message("user", "q"))
    assert len(wire.requests) == 1  # not retried
    assert KEY not in str(caught.value) and "0123456789" not in str(caught.value)
    assert message.split(":")[0].split("`")[0] in str(caught.value)
    assert KEY not in repr(model)


def test_the_key_is_sent_as_a_bearer_token(wire: Wire) -> None:
    wire.reply(completion("ok"))
    wire.reply(completion("ok"))
    ask(model_for(wire, api_key=KEY), Message("user", "q"))
    ask(model_for(wire), Message("user", "q"))
    assert [r["headers"]["authorization"] for r in wire.requests] == [
        f"Bearer {KEY}", f"Bearer {NO_KEY}"]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_are_retried(wire: Wire, status: int) -> None:
    wire.reply({"error": {"message": "slow down"}}, status, retry_after_ms="1")
    wire.reply(completion("made it"))
    assert ask(model_for(wire, max_retries=2), Message("user", "q")).text == "made it"
    assert len(wire.requests) == 2


def test_retries_are_bounded_and_end_in_a_model_error(wire: Wire) -> None:
    for _ in range(3):
        wire.reply({"error": {"message": "Rate limit reached for requests"}}, 429,
                   retry_after_ms="1")
    with pytest.raises(ModelError, match=r"HTTP 429.*Rate limit reached"):
        ask(model_for(wire, max_retries=2), Message("user", "q"))
    assert len(wire.requests) == 3


def test_a_long_error_body_is_cut_short(wire: Wire) -> None:
    wire.reply({"error": {"message": "x" * 5000}}, 400)
    with pytest.raises(ModelError) as caught:
        ask(model_for(wire), Message("user", "q"))
    assert len(str(caught.value)) < 800


def test_an_unreachable_server_is_a_model_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAICompatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ModelError, match=f"cannot reach http://127.0.0.1:{port}/v1"):
        ask(model, Message("user", "q"))


def test_a_reply_without_choices_is_a_model_output_error(wire: Wire) -> None:
    wire.reply({**completion("x"), "choices": []})
    with pytest.raises(ModelOutputError, match="no choices"):
        ask(model_for(wire), Message("user", "q"))


def test_a_missing_openai_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ExtraMissingError, match=r"overt\[openai\]"):
        ask(OpenAICompatModel("m"), Message("user", "q"))


# -- the openai: scheme --------------------------------------------------------------


def catalog(**settings: Any) -> ModelCatalog:
    return ModelCatalog(builtin_providers(),
                        options=ModelOptions(provider_settings={"openai": settings}))


def test_the_openai_scheme_builds_a_model_from_the_provider_settings(wire: Wire) -> None:
    model = catalog(base_url=wire.url, api_key=KEY, max_retries=0, timeout_s=5).get(
        "openai:gpt-test")
    assert isinstance(model, OpenAICompatModel)
    assert (model.name, model.model, model.base_url) == ("openai:gpt-test", "gpt-test", wire.url)
    wire.reply(completion("hello"))
    assert ask(model, Message("user", "hi")).text == "hello"
    assert wire.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


def test_without_settings_the_scheme_points_at_openai() -> None:
    model = catalog().get("openai:gpt-4o-mini")
    assert isinstance(model, OpenAICompatModel)
    assert model.base_url == "https://api.openai.com/v1"


def test_the_scheme_needs_a_model_name_and_well_typed_settings() -> None:
    with pytest.raises(UsageError, match="openai:NAME"):
        catalog().get("openai:")
    with pytest.raises(ConfigError, match="unknown openai settings"):
        catalog(base_uri="http://x").get("openai:m")
    with pytest.raises(ConfigError, match="max_retries must be int"):
        catalog(max_retries="3").get("openai:m")
    with pytest.raises(ConfigError, match="timeout_s must be positive"):
        catalog(timeout_s=0).get("openai:m")


# -- end to end: llama-cpp-python's OpenAI-compatible server -------------------------

ALIAS = "overt-local"  # the served model: the embedded default (`local`, 1.5B since e7df887)
TIMEOUT_S = 300
"""A request's time, not retried: the 2,600-token system prompt took 134 s at load 5,
and a client that gives up resends it to a server still reading it (one at a time)."""
TOOLS: tuple[ToolSpec, ...] = tuple(t.spec for t in builtin_tools())
"""The tools every request here offers: the two the questions need, not the memory tools,
which would take the prompt from 855 tokens to ~2,600 (minutes of prefill on a slow CPU)."""
# Exactly the system prompt of a runtime offering TOOLS (5 tool calls, the default), and of
# `overt ask` on a route offering them: every request with tools starts with the same tokens,
# so the server prefills them once (its KV cache, and --cache for the turns in between).
SYSTEM = render(load_template(None), TOOLS, 5)
USAGE_QUESTION = "What is my token usage today?"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on the embedded model; its ``/v1`` URL."""
    needs.module("llama_cpp.server",
                        reason="llama.cpp's server is not installed: llama-cpp-python[server]")
    from overt.models.assets import DEFAULT_ASSET, ensure_asset

    weights = ensure_asset(DEFAULT_ASSET, os.environ.get("OVERT_CACHE_DIR") or None,
                           progress=lambda line: print(line, file=sys.stderr))
    port, threads = _free_port(), str(os.cpu_count() or 1)
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(weights),
             "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
             "--n_ctx", "4096", "--n_threads", threads, "--n_threads_batch", threads,
             "--seed", "42", "--verbose", "False",  # 0 would mean "random" to llama-cpp
             # keep each request's state in RAM, restored when a later request shares a
             # longer prefix with it than the KV cache does: a folded answer turn (no tools)
             # then costs the next request with tools no second prefill of the tools
             "--cache", "True"],
            stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as answer:
                    if ALIAS in answer.read().decode():
                        break
            except (urllib.error.URLError, OSError):
                pass  # not listening yet
            try:
                proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama.cpp server not ready in 120 s:\n{log.read_text()[-2000:]}")
                continue
            pytest.fail(f"llama.cpp server exited {proc.returncode}:\n{log.read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _served(url: str, **options: Any) -> OpenAICompatModel:
    return OpenAICompatModel(ALIAS, base_url=url, temperature=0.0, seed=0,
                             timeout_s=TIMEOUT_S, max_retries=0, **options)


@pytest.mark.real_model
def test_the_llama_cpp_server_gives_a_plain_answer(llama_server: str) -> None:
    response = ask(_served(llama_server, max_tokens=32),
                   Message("user", "What is the capital of France? Answer in one word."))
    assert "paris" in response.text.lower(), response.text
    assert response.tool_calls == () and response.stop_reason == "end_turn"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.info["served_model"] == ALIAS
    assert str(response.info["response_id"]).startswith("chatcmpl-")


@pytest.mark.real_model
def test_the_llama_cpp_server_answers_offered_tools_with_a_valid_tool_call(
    llama_server: str,
) -> None:
    response = ask(_served(llama_server), Message("system", SYSTEM),
                   Message("user", USAGE_QUESTION), tools=TOOLS)
    assert response.tool_calls, f"no tool call; the model said {response.text!r}"
    offered = {t.name for t in TOOLS}
    for call in response.tool_calls:
        assert call.malformed is None and call.name in offered
        assert isinstance(call.arguments, dict) and call.id
    assert response.stop_reason == "tool_use"
    # the GGUF's template has no parser on the server: the call came as JSON text
    assert response.info["tool_calls_from"] == "content"


@pytest.mark.real_model
def test_an_overt_turn_through_the_llama_cpp_server_calls_a_tool_and_answers(
    llama_server: str, make_runtime: RuntimeFactory, ledger: Ledger,
) -> None:
    model = _served(llama_server, fold_tool_results=True)
    runtime = make_runtime(model, allowed_tools=[t.name for t in TOOLS])

    async def turn() -> ResponseResult:
        try:
            return await runtime.respond(cli_message(USAGE_QUESTION))
        finally:
            await model.aclose()

    result = run(turn())
    assert result.error is None, result.error
    assert result.tools_used and set(result.tools_used) <= {t.name for t in TOOLS}
    assert result.text.strip() and "<tool_call>" not in result.text
    inferences = [e.data for e in run(ledger.entries(kinds=["inference"]))]
    assert [i["stop_reason"] for i in inferences] == ["tool_use", "end_turn"]
    assert {i["model"] for i in inferences} == {f"openai:{ALIAS}"}
    assert inferences[0]["info"]["tool_calls_from"] == "content"
    assert inferences[1]["info"]["folded_tool_results"] is True
    assert all(i["input_tokens"] > 0 for i in inferences)
    assert run(ledger.verify()).ok


@pytest.mark.real_model
def test_overt_ask_with_an_openai_model_answers_through_the_llama_cpp_server(
    llama_server: str, tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OVERT_", "OPENAI_"))}
    env.update(OPENAI_BASE_URL=llama_server)
    config = tmp_path / "overt.toml"  # the client as the others here: see TIMEOUT_S
    config.write_text(f"[providers.openai]\ntimeout_s = {TIMEOUT_S}\nmax_retries = 0\n"
                      # the tools (and so the system prompt) of the requests before
                      f"[routes.default]\ntools = {json.dumps([t.name for t in TOOLS])}\n")
    out = subprocess.run(
        [sys.executable, "-m", "overt.cli.main", "--config", str(config), "--db", str(db),
         "ask", "What is the capital of France?", "--model", f"openai:{ALIAS}"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=2 * TIMEOUT_S + 60)
    assert out.returncode == 0, out.stderr
    answer = out.stdout.strip()
    assert answer and answer != "(the model gave an empty answer)", answer

    async def inferences() -> list[dict[str, Any]]:
        opened = open_ledger(str(db))
        try:
            return [e.data for e in await opened.entries(kinds=["inference"])]
        finally:
            await opened.close()

    recorded = run(inferences())
    assert recorded and {i["model"] for i in recorded} == {f"openai:{ALIAS}"}


# -- streaming ----------------------------------------------------------------------


def chunks(*contents: str, tool_calls: list[dict[str, Any]] | None = None,
           finish: str = "stop", usage: tuple[int, int] = (12, 5)) -> dict[str, Any]:
    """A streamed completion: a chunk per content piece, the finish, then the usage."""
    head = {"id": "chatcmpl-42", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "served-model-7", "system_fingerprint": "fp_abc"}
    out = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                 "finish_reason": None}]}]
    out += [{**head, "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
            for c in contents]
    for index, call in enumerate(tool_calls or ()):
        out.append({**head, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, **call}]}, "finish_reason": None}]})
    out.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    out.append({**head, "choices": [], "usage": {
        "prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}})
    return {"stream_chunks": out}


def ask_streaming(model: OpenAICompatModel, *messages: Message,
                  tools: tuple[ToolSpec, ...] = ()) -> tuple[ModelResponse, list[str]]:
    pieces: list[str] = []

    async def once() -> ModelResponse:
        try:
            return await model.complete_stream(ModelRequest(messages, tools), pieces.append)
        finally:
            await model.aclose()

    return asyncio.run(once()), pieces


def test_a_streamed_answer_arrives_in_pieces_and_reads_as_the_same_reply(wire: Wire) -> None:
    wire.reply(chunks("It is ", "sunny ", "in Oslo."))
    wire.reply(completion("It is sunny in Oslo."))
    streamed, pieces = ask_streaming(model_for(wire), Message("user", "weather?"))
    whole = ask(model_for(wire), Message("user", "weather?"))
    assert pieces == ["It is", " sunny", " in Oslo."]
    assert "".join(pieces) == streamed.text == whole.text
    assert (streamed.usage, streamed.stop_reason) == (whole.usage, whole.stop_reason)
    assert streamed.info == whole.info
    body = wire.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_a_streamed_request_the_sdk_retried_records_its_attempts(wire: Wire) -> None:
    wire.reply({"error": {"message": "slow down"}}, 429, retry_after_ms="1")
    wire.reply(chunks("made ", "it"))
    response, pieces = ask_streaming(model_for(wire, max_retries=2), Message("user", "q"))
    assert "".join(pieces) == response.text == "made it"
    assert response.info["attempts"] == 2 and len(wire.requests) == 2


def test_a_call_written_as_text_is_never_streamed(wire: Wire) -> None:
    wire.reply(chunks("Checking.\n<tool", "_call>\n{\"name\": \"get_weather\", ",
                      "\"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"))
    response, pieces = ask_streaming(model_for(wire), Message("user", "weather?"),
                                     tools=(WEATHER,))
    assert [(c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("get_weather", {"city": "Oslo"})]
    assert "".join(pieces) == "Checking."


def test_structured_calls_streamed_in_deltas_are_assembled(wire: Wire) -> None:
    wire.reply(chunks(tool_calls=[function_call("get_weather", '{"city": "Oslo"}', "call_a")],
                      finish="tool_calls"))
    response, pieces = ask_streaming(model_for(wire), Message("user", "weather?"),
                                     tools=(WEATHER,))
    assert response.tool_calls == (ToolCall("call_a", "get_weather", {"city": "Oslo"}),)
    assert pieces == [] and response.stop_reason == "tool_use"


def test_the_recorded_request_of_each_inference_is_the_body_the_server_received(
        wire: Wire, make_runtime: RuntimeFactory, ledger: Any) -> None:
    from overt.engine.request_body import expand

    wire.reply(completion(None, tool_calls=[function_call("get_usage", '{"period": "today"}')],
                          finish="tool_calls"))
    wire.reply(completion("You used 120 tokens."))
    runtime = make_runtime(model_for(wire, temperature=0.0, seed=3), tools=builtin_tools())
    run(runtime.respond(cli_message("what's my burn?")))
    entries = run(ledger.entries(kinds=["inference"]))
    assert len(entries) == 2 == len(wire.requests)
    for entry, received in zip(entries, wire.requests, strict=True):
        body = run(ledger.content(entry.data["request_digest"], seq=entry.seq))
        assert run(expand(body, ledger.content))["sent"] == received["body"]
