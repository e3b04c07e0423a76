"""The request as sent is on the record: every inference names its body in the content
tier (``request_digest``), whose parts (system prompt, tool schemas, messages) are
stored once, and the audit tier still holds no text."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from overt.engine.request_body import expand
from overt.events import InferenceRecorded
from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel, ScriptedModel
from overt.tools.base import tool
from overt.types import ModelRequest, ModelResponse, ToolCall
from tests.backends import Raw
from tests.conftest import RuntimeFactory, cli_message, run


@tool(read_only=True)
async def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo:{text}"


def inferences(ledger: Ledger) -> list[tuple[InferenceRecorded, int]]:
    return [(e.event(InferenceRecorded), e.seq)
            for e in run(ledger.entries(kinds=["inference"]))]


def request_of(ledger: Ledger, digest: str | None, seq: int) -> dict[str, Any]:
    assert digest is not None
    body = run(ledger.content(digest, seq=seq))
    assert body is not None

    async def read() -> dict[str, Any]:
        return await expand(body, ledger.content)
    return run(read())


def bodies(raw: Raw) -> list[str]:
    return [bytes(b).decode() if not isinstance(b, str) else b
            for (b,) in raw.query("SELECT body FROM content_blobs")]


def test_each_inference_records_the_request_the_model_was_sent(
    make_runtime: RuntimeFactory, ledger: Ledger
) -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
                           "done"])
    run(make_runtime(model, tools=[echo], max_output_tokens=300).respond(
        cli_message("say hi")))
    recorded = inferences(ledger)
    assert len(recorded) == 2 == len(model.requests)
    for (event, seq), sent in zip(recorded, model.requests, strict=True):
        request = request_of(ledger, event.request_digest, seq)
        assert request["system"] == sent.messages[0].content
        assert [m["role"] for m in request["messages"]] == [m.role for m in sent.messages]
        assert [m["content"] for m in request["messages"]] == [m.content
                                                               for m in sent.messages]
        assert [t["name"] for t in request["tools"]] == ["echo"]
        assert request["tools"][0]["input_schema"] == dict(sent.tools[0].input_schema)
        assert request["max_output_tokens"] == 300
        assert request["sent"] is None  # a fake sends the request as it is
    last = request_of(ledger, recorded[1][0].request_digest, recorded[1][1])["messages"]
    assert last[-1]["role"] == "tool" and last[-1]["content"] == "echo:hi"
    assert last[-2]["tool_calls"][0]["name"] == "echo"


def test_a_long_session_stores_its_system_prompt_and_tool_schemas_once(
    make_runtime: RuntimeFactory, ledger: Ledger, raw: Raw
) -> None:
    model = FunctionModel(lambda request: "ok")
    runtime = make_runtime(model, tools=[echo])
    for n in range(6):
        run(runtime.respond(cli_message(f"question {n}", session="long")))
    system = model.requests[0].messages[0].content
    assert len(system) > 200
    assert sum(b == system for b in bodies(raw)) == 1
    schema_parts = [b for b in bodies(raw) if b.startswith('{"description":"Echo')]
    assert len(schema_parts) == 1
    # the sixth request sends the five turns before it, and shares their parts
    event, seq = inferences(ledger)[-1]
    assert len(request_of(ledger, event.request_digest, seq)["messages"]) == 1 + 6 * 2 - 1


def test_a_failed_model_call_records_its_request_too(
    make_runtime: RuntimeFactory, ledger: Ledger
) -> None:
    from overt.errors import ModelError

    run(make_runtime(ScriptedModel([ModelError("down")]), tools=[echo]).respond(cli_message()))
    [(event, seq)] = inferences(ledger)
    assert event.error_type == "ModelError"
    assert request_of(ledger, event.request_digest, seq)["messages"][-1]["content"] == "hello"


class WireModel:
    """A model that sends its own payload (as a provider adapter does)."""

    name = "wire"

    def __init__(self, marker: str) -> None:
        self.marker = marker

    async def complete(self, request: ModelRequest) -> ModelResponse:
        payload = {"model": "m", "system": request.messages[0].content,
                   "messages": [{"role": m.role, "content": m.content}
                                for m in request.messages[1:]],
                   "tools": [{"name": t.name} for t in request.tools], "temperature": 0.2}
        return ModelResponse(f"answer {self.marker}", sent=payload,
                             decisions=("tools_hidden", f"leak {self.marker}"))


def test_an_adapters_payload_is_recorded_exactly_and_its_decisions_as_identifiers(
    make_runtime: RuntimeFactory, ledger: Ledger, raw: Raw, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "SECRET-41c9" + "x" * 80  # long: a part of its own
    caplog.set_level(logging.DEBUG)
    run(make_runtime(WireModel(marker), tools=[echo]).respond(cli_message(f"tell {marker}")))
    [(event, seq)] = inferences(ledger)
    assert event.adapter_decisions == ["tools_hidden", "unknown_decision"]
    request = request_of(ledger, event.request_digest, seq)
    assert request["sent"]["messages"] == [{"role": "user", "content": f"tell {marker}"}]
    assert request["sent"]["tools"] == [{"name": "echo"}]
    assert request["sent"]["temperature"] == 0.2
    assert request["sent"]["system"] == request["system"]
    for table in [t for t in raw.tables() if not t.startswith("content_")]:
        for row in raw.query(f"SELECT * FROM {table}"):
            assert "SECRET-41c9" not in json.dumps(row, default=str), f"{table} holds it"
    for record in caplog.records:
        assert "SECRET-41c9" not in record.getMessage()


def test_model_chosen_call_ids_in_a_request_reach_only_the_content_tier(
    make_runtime: RuntimeFactory, raw: Raw
) -> None:
    marker = "SECRET-77aa"
    model = ScriptedModel([
        ModelResponse("", (ToolCall(f"id-{marker}", "echo", {"text": marker}),)), "done"])
    run(make_runtime(model, tools=[echo]).respond(cli_message()))
    for table in [t for t in raw.tables() if not t.startswith("content_")]:
        for row in raw.query(f"SELECT * FROM {table}"):
            assert marker not in json.dumps(row, default=str), f"{table} holds it"
    assert any(marker in b for b in bodies(raw))


def test_a_tool_list_whose_schema_changed_is_recorded_with_the_new_schema() -> None:
    """The tool lists' parts are made once per list of the same spec objects; a spec
    replaced (an MCP server listing a tool anew) is a new list, recorded as sent."""
    from overt.engine.request_body import ToolParts
    from overt.ledger.canonical import canonical_json, digest_text
    from overt.types import ToolSpec

    stored: dict[str, str] = {}

    def store(text: str, digest: str | None = None, /) -> str:
        digest = digest or digest_text(text)
        assert digest == digest_text(text)  # a digest given is the text's
        stored[digest] = text
        return digest

    parts = ToolParts(size=2)
    old = ToolSpec("look", "Look.", {"type": "object", "properties": {}})
    first = parts.store([old], store)
    assert parts.store([old], store) == first
    new = ToolSpec("look", "Look harder.", {"type": "object", "properties": {"x": {}}})
    second = parts.store([new], store)
    assert second != first
    (schema,) = json.loads(stored[second])
    assert json.loads(stored[schema]) == {"name": "look", "description": "Look harder.",
                                          "input_schema": {"type": "object",
                                                           "properties": {"x": {}}}}
    assert stored[schema] == canonical_json(json.loads(stored[schema]))
    for n in range(5):  # more lists than it keeps: still right, whichever it dropped
        spec = ToolSpec(f"t{n}", "T.", {"type": "object"})
        (digest,) = json.loads(stored[parts.store([spec], store)])
        assert json.loads(stored[digest])["name"] == f"t{n}"
    assert parts.store([old], store) == first


def test_an_adapters_messages_are_packed_once_and_read_back_as_sent() -> None:
    """The adapter builds its payload afresh at every inference; the messages its last
    request began with are not packed again, and the packed form is the one packing
    the whole payload gives (so each request still reads back exactly as sent)."""
    from overt.engine.request_body import Chain, pack, unpack
    from overt.ledger.canonical import digest_text

    stored: dict[str, str] = {}
    asked: list[str] = []

    def store(text: str, digest: str | None = None, /) -> str:
        asked.append(text)
        digest = digest or digest_text(text)
        stored[digest] = text
        return digest

    def payload(n: int) -> dict[str, Any]:
        return {"model": "m", "system": "You are overt. " * 20, "messages": [
            {"role": "user" if i % 2 == 0 else "assistant",
             "content": [{"type": "text", "text": f"message {i} " * 20}]} for i in range(n)]}

    chain = Chain()
    for n, edit, new in ((3, None, 3), (5, None, 2), (5, 1, 4), (2, None, 1)):
        sent = payload(n)
        if edit is not None:  # a message the adapter now sends otherwise
            sent["messages"][edit]["content"][0]["text"] = "changed"
        asked.clear()
        packed = pack(sent, store, chain=chain)
        linked = len([t for t in asked if t.startswith('{"m":')])
        assert packed == pack(sent, lambda t, d=None, /: d or digest_text(t))
        assert linked == new  # only what the last request did not begin with

        async def read(digest: str) -> str | None:
            return stored.get(digest)
        assert run(unpack(packed, read)) == sent
