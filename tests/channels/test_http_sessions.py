"""Sessions over the HTTP API: a session_id continues a conversation, a new one is made
by overt, and another actor's session, turn or approval is answered as a missing one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx

from overt.channels.http import create_app
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.runtime import Runtime
from tests.channels.helpers import (
    CLIENT,
    OPERATOR,
    OTHER,
    TOKENS,
    USAGE_CALL,
    auth,
    echo_model,
    make_runtime,
    said,
)
from tests.conftest import run


def client(rt: Runtime) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt, TOKENS)),
                             base_url="http://t")


def refusals(ledger: Ledger) -> list[dict[str, Any]]:
    return [e.data for e in run(ledger.entries(kinds=["capability.checked"]))
            if not e.data["granted"]]


def test_a_second_message_with_the_session_id_reaches_the_model_with_the_first_exchange(
        ledger: Ledger, tmp_path: Path) -> None:
    model = echo_model()

    async def main() -> list[dict[str, Any]]:
        async with client(make_runtime(ledger, tmp_path, model)) as c:
            first = (await c.post("/v1/messages", json={"text": "my name is Ada"},
                                  headers=auth(CLIENT))).json()
            second = (await c.post("/v1/messages", headers=auth(CLIENT), json={
                "text": "what is my name?", "session_id": first["session_id"]})).json()
            fresh = (await c.post("/v1/messages", json={"text": "hello"},
                                  headers=auth(CLIENT))).json()
            return [first, second, fresh]
    first, second, fresh = run(main())
    assert second["session_id"] == first["session_id"]
    assert fresh["session_id"] not in (first["session_id"], "")  # a new one, made by overt
    assert said(model.requests[1]) == [("user", "my name is Ada"),
                                       ("assistant", "re: my name is Ada"),
                                       ("user", "what is my name?")]
    assert said(model.requests[2]) == [("user", "hello")]


def test_a_session_is_listed_for_its_owner_and_read_back_as_its_conversation(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, Any], ...]:
        async with client(make_runtime(ledger, tmp_path, echo_model())) as c:
            asked = (await c.post("/v1/messages", json={"text": "one"},
                                  headers=auth(CLIENT))).json()
            await c.post("/v1/messages", headers=auth(CLIENT),
                         json={"text": "two", "session_id": asked["session_id"]})
            await c.post("/v1/messages", json={"text": "the operator's"},
                         headers=auth(OPERATOR))
            mine = (await c.get("/v1/sessions", headers=auth(CLIENT))).json()
            everyone = (await c.get("/v1/sessions", headers=auth(OPERATOR))).json()
            nobody = (await c.get("/v1/sessions", headers=auth(OTHER))).json()
            read = (await c.get(f"/v1/sessions/{asked['session_id']}",
                                headers=auth(CLIENT))).json()
            bad = await c.get("/v1/sessions?limit=0", headers=auth(CLIENT))
            assert bad.status_code == 422
            return mine, everyone, nobody, read, asked
    mine, everyone, nobody, read, asked = run(main())
    assert [(s["session_id"], s["owner"], s["turns"]) for s in mine["sessions"]] == [
        (asked["session_id"], "mcp_client:claude-code", 2)]
    assert len(everyone["sessions"]) == 2 and nobody["sessions"] == []
    assert [(m["role"], m["content"]) for m in read["messages"]] == [
        ("user", "one"), ("assistant", "re: one"), ("user", "two"), ("assistant", "re: two")]


def test_another_actors_session_turn_and_approval_are_answered_as_missing_ones(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = make_runtime(ledger, tmp_path, [USAGE_CALL])

    async def main() -> tuple[list[tuple[Any, Any]], dict[str, Any], dict[str, Any]]:
        async with client(rt) as c:
            held = (await c.post("/v1/messages", json={"text": "usage?"},
                                 headers=auth(CLIENT))).json()
            session, turn, request = (held["session_id"], held["turn_id"],
                                      held["awaiting_approval"])
            probes = [
                ("POST", "/v1/messages", {"text": "hi", "session_id": "{s}"}),
                ("GET", "/v1/sessions/{s}", None), ("GET", "/v1/sessions/{s}/trail", None),
                ("GET", "/v1/turns/{t}", None), ("GET", "/v1/turns/{t}/events", None),
                ("GET", "/v1/approvals/{r}", None),
                ("POST", "/v1/approvals/{r}/approve", {}),
                ("POST", "/v1/approvals/{r}/deny", {}),
            ]
            answers = []
            for method, path, body in probes:
                def call(s: str, t: str, r: str, method: str = method, path: str = path,
                         body: Any = body) -> Any:
                    fill = {"s": s, "t": t, "r": r}
                    json = {k: v.format(**fill) if isinstance(v, str) else v
                            for k, v in body.items()} if body is not None else None
                    return c.request(method, path.format(**fill), json=json,
                                     headers=auth(OTHER))
                foreign = await call(session, turn, request)
                missing = await call("no-such-session", "no-such-turn", "no-such-request")
                answers.append(((foreign.status_code, foreign.json()),
                                (missing.status_code, missing.json())))
            listed = (await c.get("/v1/approvals", headers=auth(OTHER))).json()
            owners = (await c.get("/v1/approvals", headers=auth(CLIENT))).json()
            return answers, listed, owners
    answers, listed, owners = run(main())
    for foreign, missing in answers:
        assert foreign == missing and foreign[0] == 404, (foreign, missing)
    assert {m["error"]["message"] for (_, m), _ in answers} == {
        "no such session", "no such turn", "no such approval request"}
    assert listed["approvals"] == [] and len(owners["approvals"]) == 1
    assert len(rt.model.requests) == 1  # type: ignore[attr-defined]  # no refused post ran
    recorded = refusals(ledger)
    assert len(recorded) == 2 * len(answers)  # every refusal, foreign or missing
    assert all(r["actor"] == "mcp_client:other" and "no-such" not in r["subject"]
               for r in recorded)  # the ids a caller chose are recorded as digests
    assert [r["reason_code"] for r in recorded] == ["not_owner", "not_found"] * len(answers)


def test_a_session_id_the_client_invents_is_refused_and_no_session_is_made(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        async with client(make_runtime(ledger, tmp_path, echo_model())) as c:
            invented = await c.post("/v1/messages", headers=auth(OPERATOR),
                                    json={"text": "hi", "session_id": "mine-now"})
            read = await c.get("/v1/sessions/mine-now", headers=auth(OPERATOR))
            return invented.status_code, read.status_code
    assert run(main()) == (404, 404)
    assert run(ledger.entries(kinds=["turn.started"])) == []


def test_a_session_is_continued_by_a_server_started_again_on_the_same_ledger(
        ledger_url: str, tmp_path: Path) -> None:
    async def ask(body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        model = echo_model()
        opened = open_ledger(ledger_url)
        try:
            async with client(make_runtime(opened, tmp_path, model)) as c:
                answer = (await c.post("/v1/messages", json=body, headers=auth(CLIENT))).json()
        finally:
            await opened.close()
        return answer, model

    first, _ = run(ask({"text": "my name is Ada"}))
    again, model = run(ask({"text": "what is my name?", "session_id": first["session_id"]}))
    assert again["session_id"] == first["session_id"]
    assert said(model.requests[0]) == [("user", "my name is Ada"),
                                       ("assistant", "re: my name is Ada"),
                                       ("user", "what is my name?")]
