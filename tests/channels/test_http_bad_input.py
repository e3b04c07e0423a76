"""Bad requests to the HTTP API: a clean 4xx JSON error, never a 500, and the ledger
still verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx

from overt.channels.http import create_app
from overt.ledger.base import Ledger
from overt.runtime import Runtime
from overt.sessions import list_sessions
from tests.channels.helpers import APPROVER, CLIENT, TOKENS, auth, make_runtime
from tests.conftest import run


def client(rt: Runtime) -> httpx.AsyncClient:
    app = create_app(rt, TOKENS)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def _error(r: httpx.Response) -> tuple[int, str]:
    assert r.headers["content-type"].startswith("application/json"), r.text
    return r.status_code, r.json()["error"]["code"]


def test_a_body_nested_thousands_deep_is_a_400_not_a_500(ledger: Ledger, tmp_path: Path) -> None:
    deep = '{"text": "hi", "metadata": {"a": ' + "[" * 5000 + "]" * 5000 + "}}"

    async def main() -> tuple[Any, ...]:
        async with client(make_runtime(ledger, tmp_path, ["never"])) as c:
            headers = {**auth(CLIENT), "Content-Type": "application/json"}
            message = await c.post("/v1/messages", content=deep, headers=headers)
            decide = await c.post("/v1/approvals/nope/approve", content=deep,
                                  headers={**auth(APPROVER), "Content-Type": "application/json"})
            return _error(message), _error(decide), message.json()["error"]["message"]
    message, decide, text = run(main())
    assert message == decide == (400, "malformed_json") and "nested too deeply" in text
    assert run(ledger.count("turn.started")) == 0
    assert run(ledger.verify()).ok


def test_a_misspelt_field_is_a_422_naming_it_and_no_turn_or_decision_is_made(
        ledger: Ledger, tmp_path: Path) -> None:
    """``sesion`` for ``session_id`` would otherwise start a new conversation: the
    caller's own session would be silently left behind."""
    async def main() -> tuple[Any, ...]:
        async with client(make_runtime(ledger, tmp_path, ["first answer"])) as c:
            first = await c.post("/v1/messages", json={"text": "hi"}, headers=auth(CLIENT))
            session = first.json()["session_id"]
            typo = await c.post("/v1/messages", json={"text": "and then?", "sesion": session},
                                headers=auth(CLIENT))
            decide = await c.post("/v1/approvals/nope/approve", json={"reasn": "ok"},
                                  headers=auth(APPROVER))
            return _error(typo), typo.json()["error"]["message"], _error(decide)
    typo, text, decide = run(main())
    assert typo == decide == (422, "invalid")
    assert "'sesion'" in text and "session_id" in text
    assert run(ledger.count("turn.started")) == 1  # the first message's only
    assert run(ledger.verify()).ok


def test_a_misspelt_query_parameter_is_a_422_naming_it_not_an_unfiltered_answer(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[Any]:
        async with client(make_runtime(ledger, tmp_path, ["an answer"])) as c:
            await c.post("/v1/messages", json={"text": "hi"}, headers=auth(CLIENT))
            typo = await c.get("/v1/sessions?limt=1", headers=auth(CLIENT))
            status = await c.get("/v1/approvals?stauts=pending", headers=auth(APPROVER))
            good = await c.get("/v1/sessions?limit=1", headers=auth(CLIENT))
            return [_error(typo), typo.json()["error"]["message"], _error(status),
                    good.status_code]
    typo, text, status, good = run(main())
    assert typo == status == (422, "invalid")
    assert "'limt'" in text and "takes: limit" in text
    assert good == 200


def test_an_unknown_api_route_or_method_is_a_json_error_and_the_cockpit_keeps_plain_text(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[Any]:
        async with client(make_runtime(ledger, tmp_path, [])) as c:
            put = await c.put("/v1/messages", headers=auth(CLIENT))
            return [_error(await c.get("/v1/nothing", headers=auth(CLIENT))),
                    _error(put), put.headers["allow"],
                    _error(await c.delete("/v1/sessions", headers=auth(CLIENT))),
                    (await c.get("/not-the-api")).headers["content-type"]]
    missing, put, allow, delete, page = run(main())
    assert missing == (404, "not_found")
    assert put == delete == (405, "method_not_allowed") and allow == "POST"
    assert page.startswith("text/plain")


def test_a_trail_since_or_until_that_is_not_a_time_is_a_422_not_an_empty_trail(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[Any]:
        async with client(make_runtime(ledger, tmp_path, ["Hello."])) as c:
            body = (await c.post("/v1/messages", json={"text": "hi"},
                                 headers=auth(CLIENT))).json()
            url = f"/v1/sessions/{body['session_id']}/trail"
            bad = [await c.get(url, params={k: "garbage"}, headers=auth(CLIENT))
                   for k in ("since", "until")]
            good = await c.get(url, params={"since": "24h", "until": "2999-01-01T00:00:00Z"},
                               headers=auth(CLIENT))
            return [*(_error(r) for r in bad), bad[0].json()["error"]["message"],
                    [t["status"] for t in good.json()["turns"]]]
    since, until, message, turns = run(main())
    assert since == until == (422, "invalid") and "unknown period 'garbage'" in message
    assert turns == ["completed"]


def test_a_trail_time_past_the_ends_of_the_utc_calendar_bounds_it_and_year_999_sorts_first(
        ledger: Ledger, tmp_path: Path) -> None:
    # found by schemathesis against a live server: ?since=0001-01-01T00:00:00+01:00 was a
    # 500 (OverflowError), and ?since=0999-01-01 an empty trail ("999-..." > "2026-...")
    async def main() -> list[Any]:
        async with client(make_runtime(ledger, tmp_path, ["Hello."])) as c:
            body = (await c.post("/v1/messages", json={"text": "hi"},
                                 headers=auth(CLIENT))).json()
            url = f"/v1/sessions/{body['session_id']}/trail"
            found = [await c.get(url, params=params, headers=auth(CLIENT)) for params in (
                {"since": "0001-01-01T00:00:00+01:00", "until": "9999-12-31T23:59:59-01:00"},
                {"since": "0999-01-01"}, {"until": "0001-01-01T00:00:00+01:00"})]
            return [(r.status_code, [t["status"] for t in r.json()["turns"]]) for r in found]
    assert run(main()) == [(200, ["completed"]), (200, ["completed"]), (200, [])]


def test_an_id_holding_nul_is_answered_as_missing_on_both_backends(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[Any]:
        async with client(make_runtime(ledger, tmp_path, ["never"])) as c:
            headers = auth(APPROVER)  # sessions.read_any: nothing is refused for ownership
            return [_error(await c.get(path, headers=headers)) for path in (
                "/v1/sessions/a%00b", "/v1/sessions/a%00b/trail", "/v1/turns/a%00b",
                "/v1/turns/a%00b/events", "/v1/approvals/a%00b")] + [
                _error(await c.post("/v1/approvals/a%00b/deny", headers=headers, json={})),
                _error(await c.post("/v1/messages", headers=headers,
                                    json={"text": "hi", "session_id": "a\u0000b"}))]
    assert run(main()) == [(404, "not_found")] * 7  # was 503 ledger_unavailable on PostgreSQL
    refusals = run(ledger.entries(kinds=["capability.checked"]))
    assert [e.data["reason_code"] for e in refusals] == ["not_found"] * 7
    assert run(ledger.count("turn.started")) == 0
    assert run(ledger.verify()).ok


def test_a_message_holding_nul_keeps_its_trail_and_every_text_search_working(
        ledger: Ledger, tmp_path: Path) -> None:
    # found by schemathesis on PostgreSQL: text cannot hold NUL, and convert_from of one
    # such body failed that session's trail (503) and every text search (the cockpit's)
    # that reached it, whoever searched
    async def main() -> tuple[Any, ...]:
        async with client(make_runtime(ledger, tmp_path, ["Hello\x00there.", "Fine."])) as c:
            asked = (await c.post("/v1/messages", json={"text": "odd\x00byte"},
                                  headers=auth(CLIENT))).json()
            other = (await c.post("/v1/messages", json={"text": "plain words"},
                                  headers=auth(CLIENT))).json()
            trail = await c.get(f"/v1/sessions/{asked['session_id']}/trail",
                                headers=auth(CLIENT))
            conversation = await c.get(f"/v1/sessions/{asked['session_id']}",
                                       headers=auth(CLIENT))
        found = {q: [s.session_id for s in await list_sessions(ledger, text=q)]
                 for q in ("PLAIN", "odd", "\x00", "there")}
        filtered = await list_sessions(ledger, owner="mcp_client:claude-code\x00")
        return asked, other, trail, conversation, found, filtered
    asked, other, trail, conversation, found, filtered = run(main())
    assert trail.status_code == 200, trail.text
    assert trail.json()["turns"][0]["message"] == "odd\x00byte"
    assert [m["content"] for m in conversation.json()["messages"]] == [
        "odd\x00byte", "Hello\x00there."]
    assert found["PLAIN"] == [other["session_id"]] and found["odd"] == [asked["session_id"]]
    assert len(found["\x00"]) == 2  # NUL is left out of the search: every session
    assert found["there"] == [asked["session_id"]]  # past the NUL, on both backends
    assert filtered == []


def test_a_message_with_a_lone_surrogate_is_a_422_on_both_backends_not_a_changed_text(
        ledger: Ledger, tmp_path: Path) -> None:
    """JSON may escape a lone surrogate (``\\udce9``); SQLite stored it as U+FFFD (the
    message silently changed), PostgreSQL failed mid-turn."""
    async def main() -> list[tuple[tuple[int, str], str]]:
        async with client(make_runtime(ledger, tmp_path, ["never"])) as c:
            out = []
            for body in (b'{"text": "caf\\udce9"}', b'{"text": "hi", "session_id": "\\uD800"}',
                         b'{"text": "hi", "metadata": {"\\udce9": 1}}'):
                answer = await c.post("/v1/messages", content=body, headers={
                    **auth(CLIENT), "Content-Type": "application/json"})
                out.append((_error(answer), answer.json()["error"]["message"]))
            fine = await c.post("/v1/messages", json={"text": "ok \U0001F600"},
                                headers=auth(CLIENT))  # a pair, escaped by json.dumps
            assert fine.status_code == 200, fine.text
            return out
    out = run(main())
    assert [error for error, _ in out] == [(422, "invalid")] * 3
    assert [text.rpartition("(")[2] for _, text in out] == ["'\\udce9')", "'\\ud800')",
                                                            "'\\udce9')"]
    assert "half a surrogate pair, which is not a character" in out[0][1]
    assert run(ledger.count("turn.started")) == 1
