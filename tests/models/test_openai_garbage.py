"""The OpenAI-compatible adapter against a server that answers garbage on the real
wire: bodies cut short, replies missing fields, broken usage, a stream cut mid-answer.
Each is a clear :class:`ModelOutputError` (or, for usage, a kept answer), never an
SDK exception, and a cut stream is never taken as the answer."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from overt.engine.answer_stream import AnswerDelta, AnswerEvent
from overt.errors import ModelOutputError
from overt.ledger.base import Ledger
from overt.models.openai_compat import OpenAICompatModel
from overt.types import Message, ModelRequest, ModelResponse
from tests import needs
from tests.conftest import RuntimeFactory, cli_message, run

needs.module("openai", reason="the openai SDK is not installed: pip install 'overt[openai]'")

Reply = tuple[str, bytes]  # content type, the bytes sent before the connection closes


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        kind, data = self.server.replies.popleft()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Connection", "close")
        self.end_headers()  # no Content-Length: the body ends where the connection does
        self.wfile.write(data)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def garbage() -> Iterator[tuple[str, deque[Reply]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.replies = deque()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", server.replies  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def _completion(**choice: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", **choice}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def _json(body: object) -> Reply:
    return "application/json", json.dumps(body).encode()


def _chunk(content: str) -> bytes:
    return ("data: " + json.dumps({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": content},
                     "finish_reason": None}]}) + "\n\n").encode()


def _ask(url: str, *, stream: bool) -> ModelResponse:
    model = OpenAICompatModel("m", base_url=url, max_retries=0, timeout_s=10)

    async def once() -> ModelResponse:
        request = ModelRequest((Message("user", "q"),))
        try:
            if stream:
                return await model.complete_stream(request, lambda _text: None)
            return await model.complete(request)
        finally:
            await model.aclose()
    return asyncio.run(once())


UNREADABLE = {
    "a body cut short": ("application/json",
                         json.dumps(_completion(message={"content": "x"})).encode()[:40]),
    "an empty body": ("application/json", b""),
    "a choice without a message": _json(_completion()),
    "a null message": _json(_completion(message=None)),
}


@pytest.mark.slow
@pytest.mark.parametrize("reply", UNREADABLE.values(), ids=list(UNREADABLE))
def test_a_reply_that_cannot_be_read_is_a_model_output_error_naming_the_model(
        garbage: tuple[str, deque[Reply]], reply: Reply) -> None:
    url, replies = garbage
    replies.append(reply)
    with pytest.raises(ModelOutputError, match=r"^openai:m: the reply"):
        _ask(url, stream=False)


STREAMS = {
    "cut mid-answer": _chunk("Hello, I will ") + b'data: {"id": "c1", "choi',
    "closed after a chunk": _chunk("Hello, I will "),
    "no chunk at all": b"data: [DONE]\n\n",
    "an event that is not JSON": b"data: not json\n\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("events", STREAMS.values(), ids=list(STREAMS))
def test_a_stream_that_ends_before_its_finish_is_a_model_output_error(
        garbage: tuple[str, deque[Reply]], events: bytes) -> None:
    url, replies = garbage
    replies.append(("text/event-stream", events))
    with pytest.raises(ModelOutputError, match=r"^openai:m: the (stream|reply)"):
        _ask(url, stream=True)


@pytest.mark.slow
@pytest.mark.parametrize("usage", [{"prompt_tokens": "many", "completion_tokens": None},
                                   {"prompt_tokens": -4, "completion_tokens": 1e400}])
def test_usage_that_is_not_token_counts_is_recorded_as_zero_and_the_answer_kept(
        garbage: tuple[str, deque[Reply]], usage: dict[str, Any]) -> None:
    url, replies = garbage
    body = _completion(message={"role": "assistant", "content": "fine"})
    replies.append(("application/json", json.dumps({**body, "usage": usage}).encode()))
    response = _ask(url, stream=False)
    assert (response.text, response.usage.input_tokens, response.usage.output_tokens) == (
        "fine", 0, 0)


@pytest.mark.slow
def test_a_turn_whose_stream_is_cut_records_a_model_error_not_the_partial_answer(
        garbage: tuple[str, deque[Reply]], ledger: Ledger,
        make_runtime: RuntimeFactory) -> None:
    url, replies = garbage
    replies.append(("text/event-stream", _chunk("The answer is 4") + b"data: {\"id"))
    shown: list[AnswerEvent] = []
    model = OpenAICompatModel("m", base_url=url, max_retries=0, timeout_s=10)
    result = run(make_runtime(model).respond(cli_message(), on_answer=shown.append))
    assert result.error is not None and result.error.kind == "model_error"
    assert "ended before the reply was complete" in result.error.message
    assert "The answer is 4" not in result.text  # was recorded as the whole answer
    [completed] = run(ledger.entries(turn_id=result.turn_id, kinds=["turn.completed"]))
    assert completed.data["status"] == "model_error"
    after_reset = shown[max(i for i, e in enumerate(shown) if not isinstance(e, AnswerDelta)):]
    assert "".join(e.text for e in after_reset if isinstance(e, AnswerDelta)) == result.text
    assert run(ledger.verify()).ok


@pytest.mark.slow
@pytest.mark.parametrize(("reply", "says"), [
    (("text/html", b"<html><body>502 Bad gateway</body></html>"),
     "it is not a chat completion but '<html><body>502 Bad gateway"),
    (_json({"error": {"message": "model not loaded"}}), "the server says .*model not loaded"),
])
def test_a_reply_without_choices_says_what_it_was_instead(
        garbage: tuple[str, deque[Reply]], reply: Reply, says: str) -> None:
    """A proxy's HTML page or the server's own error object, not only "no choices"."""
    url, replies = garbage
    replies.append(reply)
    with pytest.raises(ModelOutputError, match=f"^openai:m: the reply holds no choices: {says}"):
        _ask(url, stream=False)


def test_content_sent_as_a_list_of_parts_is_the_answer_not_an_empty_one(
        garbage: tuple[str, deque[Reply]]) -> None:
    """Some servers send ``content`` as parts: the answer was dropped as empty text."""
    url, replies = garbage
    replies.append(_json(_completion(message={"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Hello, "},
        {"type": "text", "text": "world."}]})))
    assert _ask(url, stream=False).text == "Hello, world."


@pytest.mark.slow
@pytest.mark.parametrize("content", [5, {"text": "x"}, [{"type": "text", "text": 5}]])
def test_content_that_is_not_text_is_a_model_output_error(
        garbage: tuple[str, deque[Reply]], content: Any) -> None:
    url, replies = garbage
    replies.append(_json(_completion(message={"role": "assistant", "content": content})))
    with pytest.raises(ModelOutputError, match=r"^openai:m: the reply's content is not text"):
        _ask(url, stream=False)
