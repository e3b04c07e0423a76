"""The HTTP API: auth, capabilities, messages, turns, trails, approvals, limits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from overt.channels import openapi
from overt.channels.http import CAPABILITIES, create_app
from overt.ledger.base import Ledger
from overt.runtime import Runtime
from tests.channels.helpers import (
    APPROVER,
    CLIENT,
    OPERATOR,
    TOKENS,
    USAGE_CALL,
    auth,
    make_runtime,
)
from tests.conftest import run


def client(rt: Runtime, **kw: Any) -> httpx.AsyncClient:
    app = create_app(rt, TOKENS, **kw)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def test_healthz_and_openapi_need_no_token(ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> None:
        async with client(make_runtime(ledger, tmp_path, [])) as c:
            assert (await c.get("/healthz")).json()["status"] == "ok"
            assert (await c.get("/openapi.json")).json()["openapi"] == "3.1.0"
    run(main())


def test_every_route_is_in_the_openapi_document_and_every_path_is_a_route(
        ledger: Ledger, tmp_path: Path) -> None:
    app = create_app(make_runtime(ledger, tmp_path, []), TOKENS)
    routes = {(m.lower(), r.path) for r in app.routes  # type: ignore[attr-defined]
              for m in (r.methods or ()) if m != "HEAD"}  # type: ignore[attr-defined]
    documented = {(m, p) for p, ops in openapi.paths().items() for m in ops}
    assert routes == documented
    assert {(m.lower(), p) for m, p in CAPABILITIES} <= documented


def test_a_v1_route_without_a_valid_token_is_401(ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> None:
        async with client(make_runtime(ledger, tmp_path, [])) as c:
            assert (await c.get("/v1/approvals")).status_code == 401
            r = await c.get("/v1/approvals", headers=auth("wrong"))
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    run(main())


def test_a_message_is_answered_with_its_response_result_and_recorded_as_http(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        async with client(make_runtime(ledger, tmp_path, ["Hello there."])) as c:
            r = await c.post("/v1/messages", json={"text": "hi"}, headers=auth(CLIENT))
            assert r.status_code == 200
            body: dict[str, Any] = r.json()
            turn = (await c.get(f"/v1/turns/{body['turn_id']}", headers=auth(CLIENT))).json()
            assert turn["status"] == "completed" and turn["text"] == "Hello there."
            return body
    body = run(main())
    assert body["text"] == "Hello there." and body["tools_used"] == []
    assert body["caller_session_id"] == f"http:{body['request_id']}"
    started = run(ledger.entries(turn_id=body["turn_id"], kinds=["turn.started"]))[0]
    assert started.data["source"] == "http"
    assert started.data["caller_session_id"] == f"http:{body['request_id']}"
    line = json.loads((tmp_path / "transcript.jsonl").read_text().splitlines()[-1])
    assert (line["source"], line["tools_used"]) == ("http", [])


def test_malformed_oversized_and_mistyped_bodies_are_4xx(ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> None:
        async with client(make_runtime(ledger, tmp_path, []), max_body_bytes=100) as c:
            h = auth(CLIENT)
            assert (await c.post("/v1/messages", content=b"{", headers=h)).status_code == 400
            assert (await c.post("/v1/messages", json={"text": 3}, headers=h)).status_code == 422
            assert (await c.post("/v1/messages", json={}, headers=h)).status_code == 422
            assert (await c.post("/v1/messages", json=[1], headers=h)).status_code == 422
            big = {"text": "x" * 200}
            assert (await c.post("/v1/messages", json=big, headers=h)).status_code == 413
    run(main())


def test_a_capability_the_actor_lacks_is_403_and_on_the_record(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> None:
        rt = make_runtime(ledger, tmp_path, [])
        rt.gate.capabilities = type(rt.gate.capabilities)({"mcp_client:claude-code": []})
        async with client(rt) as c:
            r = await c.get("/v1/approvals", headers=auth(CLIENT))
            assert r.status_code == 403 and r.json()["error"]["code"] == "capability_missing"
    run(main())
    refused = run(ledger.entries(kinds=["capability.checked"]))[-1].data
    assert (refused["actor"], refused["capability"], refused["granted"]) == (
        "mcp_client:claude-code", "approvals.read", False)
    assert refused["subject"] == "http:GET /v1/approvals"


def test_a_turn_held_for_approval_answers_on_the_same_http_request_once_approved(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        rt = make_runtime(ledger, tmp_path, [USAGE_CALL, "You used 0 tokens."])
        async with client(rt) as c:
            asking = asyncio.create_task(c.post(
                "/v1/messages", json={"text": "usage?", "wait_s": 30}, headers=auth(CLIENT)))
            pending: list[Any] = []
            for _ in range(500):
                pending = (await c.get("/v1/approvals?status=pending",
                                       headers=auth(CLIENT))).json()["approvals"]
                if pending:
                    break
                await asyncio.sleep(0.01)
            request_id = pending[0]["request_id"]
            refused = await c.post(f"/v1/approvals/{request_id}/approve", json={},
                                   headers=auth(CLIENT))
            assert refused.status_code == 403
            decided = await c.post(f"/v1/approvals/{request_id}/approve",
                                   json={"reason": "fine"}, headers=auth(OPERATOR))
            assert decided.status_code == 200
            again = await c.post(f"/v1/approvals/{request_id}/deny", headers=auth(OPERATOR))
            assert again.status_code == 409
            answered = (await asyncio.wait_for(asking, 30)).json()
            return answered, decided.json()
    answered, decided = run(main())
    assert answered["text"] == "You used 0 tokens." and answered["tools_used"] == ["get_usage"]
    assert answered["awaiting_approval"] is None
    assert decided["request"]["decided_by"] == "operator:alice"
    assert decided["result"]["turn_id"] == answered["turn_id"]


def test_the_session_trail_and_the_turn_event_stream(ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, Any], str]:
        async with client(make_runtime(ledger, tmp_path, ["Hi."])) as c:
            body = (await c.post("/v1/messages", json={"text": "hi"},
                                 headers=auth(APPROVER))).json()
            trail = (await c.get(f"/v1/sessions/{body['session_id']}/trail",
                                 headers=auth(APPROVER))).json()
            events = await c.get(f"/v1/turns/{body['turn_id']}/events", headers=auth(APPROVER))
            missing = await c.get("/v1/sessions/nope/trail", headers=auth(APPROVER))
            assert missing.status_code == 404
            return trail, events.text
    trail, stream = run(main())
    assert [t["status"] for t in trail["turns"]] == ["completed"]
    assert "event: turn.started" in stream and stream.rstrip().split("\n")[-2].startswith(
        "event: turn.completed")


@pytest.mark.parametrize("path", ["/v1/turns/none", "/v1/approvals/none"])
def test_an_unknown_id_is_404(ledger: Ledger, tmp_path: Path, path: str) -> None:
    async def main() -> int:
        async with client(make_runtime(ledger, tmp_path, [])) as c:
            return (await c.get(path, headers=auth(OPERATOR))).status_code
    assert run(main()) == 404


def test_a_turn_the_ledger_cannot_record_is_503_ledger_unavailable_not_an_answer(
        ledger: Any, tmp_path: Path) -> None:
    runtime = make_runtime(ledger, tmp_path, ["never sent"])

    async def main() -> httpx.Response:
        async with client(runtime) as c:
            await ledger.close()  # the database went away under the server
            return await c.post("/v1/messages", json={"text": "hi"}, headers=auth(CLIENT))
    r = run(main())
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json()["error"]["code"] == "ledger_unavailable"  # whether a read or an append
    assert "never sent" not in r.text  # refused, never answered
