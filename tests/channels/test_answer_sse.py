"""POST /v1/messages streamed: the answer as Server-Sent Events, then the usual JSON."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx2 as httpx

from overt.channels.http import create_app
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.models.base import TextSink
from overt.types import ModelRequest, ModelResponse
from tests.channels.helpers import OPERATOR, TOKENS, auth, make_runtime, uvicorn_server
from tests.conftest import run

SCRIPT: list[Any] = [
    {"text": "Let me check.", "tool_calls": [{"name": "get_operational_state",
                                              "arguments": {}}]},
    "All is well:\n\nthe runtime is up."]


def events(body: str) -> list[tuple[str, dict[str, Any]]]:
    """(event, data) of each SSE event in ``body`` (comments skipped)."""
    out = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n")
                      if line and not line.startswith(":"))
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


def shown(stream: list[tuple[str, dict[str, Any]]]) -> str:
    text = ""
    for kind, data in stream:
        text = text + data["text"] if kind == "delta" else "" if kind == "reset" else text
    return text


def test_a_streamed_answer_through_uvicorn_adds_up_to_the_reply_it_records(
        ledger: Ledger, tmp_path: Path) -> None:
    app = create_app(make_runtime(ledger, tmp_path, list(SCRIPT)), TOKENS,
                     close_on_shutdown=False)

    async def main(base: str) -> tuple[str, str, dict[str, Any]]:
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            async with c.stream("POST", "/v1/messages", json={"text": "state?", "stream": True},
                                headers=auth(OPERATOR)) as response:
                kind = response.headers["content-type"]
                body = "".join([chunk async for chunk in response.aiter_text()])
            plain = await c.post("/v1/messages", json={"text": "again"},
                                 headers={**auth(OPERATOR), "Accept": "application/json"})
            return kind, body, plain.json()

    with uvicorn_server(app) as base:
        kind, body, plain = run(main(base))
    stream = events(body)
    assert kind.startswith("text/event-stream")
    assert [k for k, _ in stream][:2] == ["delta", "delta"] and ("reset", {
        "reason": "tool_call"}) in stream
    (done_kind, done), = stream[-1:]
    assert done_kind == "done" and shown(stream[:-1]) == done["text"] == SCRIPT[1]
    assert set(done) == set(plain)  # the same JSON as an answer not streamed
    assert done["tools_used"] == ["get_operational_state"]
    completed = [e.data for e in run(ledger.entries(kinds=["turn.completed"]))
                 if e.turn_id == done["turn_id"]]
    assert completed[0]["reply_digest"] == digest_text(done["text"])


def test_accept_event_stream_asks_for_a_stream_and_a_wrong_stream_field_is_422(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[str, int]:
        app = create_app(make_runtime(ledger, tmp_path, ["Hi there."]), TOKENS)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as c:
            streamed = await c.post("/v1/messages", json={"text": "hi"},
                                    headers={**auth(OPERATOR), "Accept": "text/event-stream"})
            wrong = await c.post("/v1/messages", json={"text": "hi", "stream": "yes"},
                                 headers=auth(OPERATOR))
            return streamed.text, wrong.status_code
    body, status = run(main())
    stream = events(body)
    assert shown(stream) == "Hi there." and stream[-1][0] == "done"
    assert status == 422


class Held:
    """Streams a first word, then waits for ``go`` (set by the test) to write the rest."""

    name = "held"

    def __init__(self) -> None:
        self.go = threading.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse("Hello operator.")

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        on_text("Hello ")
        assert await asyncio.to_thread(self.go.wait, 30)
        on_text("operator.")
        return ModelResponse("Hello operator.")


def test_a_client_that_leaves_mid_stream_does_not_stop_the_turn_or_its_record(
        ledger: Ledger, tmp_path: Path) -> None:
    model = Held()
    app = create_app(make_runtime(ledger, tmp_path, model), TOKENS, close_on_shutdown=False)

    async def main(base: str) -> str:
        async with httpx.AsyncClient(base_url=base, timeout=30) as c, c.stream(
                "POST", "/v1/messages", json={"text": "hi", "stream": True},
                headers=auth(OPERATOR)) as response:
            async for chunk in response.aiter_text():
                if "event: delta" in chunk:
                    return chunk  # and leave: the connection closes here
        return ""

    with uvicorn_server(app) as base:
        first = run(main(base))
        model.go.set()
    # the server drained the turn before it stopped
    assert '"Hello "' in first
    (done,) = [e.data for e in run(ledger.entries(kinds=["turn.completed"]))]
    assert done["status"] == "completed"
    assert done["reply_digest"] == digest_text("Hello operator.")
    assert run(ledger.verify()).ok
