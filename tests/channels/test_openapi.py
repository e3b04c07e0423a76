"""schemathesis against the served OpenAPI document: no 500s, responses as documented."""

from __future__ import annotations

import json
import re
import tempfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import jsonschema
import schemathesis
from hypothesis import HealthCheck, settings

from overt.channels import openapi
from overt.channels.http import create_app
from overt.channels.transcript import Transcript
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from tests.channels.helpers import OPERATOR, TOKENS, auth
from tests.conftest import run


def _app(db: Path) -> Any:
    runtime = Runtime(model=FunctionModel(lambda request: "Noted."),
                      ledger=open_ledger(str(db)),
                      transcript=Transcript(db.parent / "transcript.jsonl"))
    return create_app(runtime, TOKENS, max_body_bytes=10_000,
                      close_on_shutdown=False)


# schemathesis parametrizes at import, so the app is built then, on its own ledger
# (schemathesis.pytest.from_fixture does not work with this pytest).
_DB = Path(tempfile.mkdtemp(prefix="overt-openapi-")) / "ledger.db"
schema = schemathesis.openapi.from_asgi("/openapi.json", _app(_DB))


@schema.parametrize()
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_the_api_keeps_to_its_openapi_document(case: Any) -> None:
    # follow=false: a stream of a live turn would never end under a fuzzer
    if case.path.endswith("/events"):
        case.query = {**(case.query or {}), "follow": "false"}
    # negative_data_rejection is left out: the API ignores unknown query parameters
    # (as most do), and a case that drops the token gets ours back from `headers`
    case.call_and_validate(headers=auth(OPERATOR),
                           excluded_checks=[schemathesis.checks.negative_data_rejection])


# What schemathesis found against a live `overt serve`, held here on both backends.

def _schema_of(path: str, method: str, name: str) -> dict[str, Any]:
    params = openapi.paths()[path][method]["parameters"]
    return next(p["schema"] for p in params if p["name"] == name)


_FORMATS = jsonschema.FormatChecker()
_RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
                      r"([Zz]|[+-][0-9]{2}:[0-9]{2})")


@_FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:  # jsonschema checks it only with another package
    if not isinstance(value, str):
        return True
    if not _RFC3339.fullmatch(value):
        return False
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))  # a real day and time
    return True


@_FORMATS.checks("date", raises=ValueError)
def _date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return False
    date.fromisoformat(value)  # a real day
    return True


def _valid(instance: Any, schema: dict[str, Any]) -> bool:
    validator = jsonschema.Draft202012Validator(
        {**schema, "components": openapi.SCHEMAS}, format_checker=_FORMATS)
    return validator.is_valid(instance)


def _sse(text: str) -> list[dict[str, str]]:
    """The events of an SSE body that carry data, as {field: value}."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(":"))
        if "data" in fields:
            events.append(fields)
    return events


def test_a_turns_event_stream_keeps_to_its_documented_event_schema(
        ledger: Ledger, tmp_path: Path) -> None:
    schema = openapi.paths()["/v1/turns/{turn_id}/events"]["get"]["responses"]["200"][
        "content"]["text/event-stream"]["schema"]

    async def main() -> tuple[list[dict[str, str]], int, int]:
        rt = Runtime(model=FunctionModel(lambda request: "Noted."), ledger=ledger,
                     transcript=Transcript(tmp_path / "transcript.jsonl"))
        app = create_app(rt, TOKENS, close_on_shutdown=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as c:
            turn = (await c.post("/v1/messages", json={"text": "hi"},
                                 headers=auth(OPERATOR))).json()["turn_id"]
            url = f"/v1/turns/{turn}/events"
            events = _sse((await c.get(url, headers=auth(OPERATOR))).text)
            blank = await c.get(url, headers={**auth(OPERATOR), "Last-Event-ID": ""})
            bad = [await c.get(url, params=params, headers={**auth(OPERATOR), **header})
                   for params, header in (({}, {"Last-Event-ID": "1_0"}),
                                          ({"follow": "maybe"}, {}))]
            return events, blank.status_code, sum(r.status_code == 422 for r in bad)
    events, blank, refused = run(main())
    assert events[0]["event"] == "turn.started" and len(events) >= 3
    assert all(_valid(e, schema) for e in events)
    assert json.loads(events[0]["data"])["kind"] == "turn.started"
    header = _schema_of("/v1/turns/{turn_id}/events", "get", "Last-Event-ID")
    assert _valid("", header) and blank == 200  # documented as it is served
    assert not _valid("1_0", header) and refused == 2


def test_a_trail_takes_every_period_its_document_allows_and_refuses_the_rest(
        ledger: Ledger, tmp_path: Path) -> None:
    schema = _schema_of("/v1/sessions/{session_id}/trail", "get", "since")
    allowed = ["today", " ALL ", "7d", "99999w", "2026-01-02", "2026-01-02t03:04:05z",
               "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]
    refused = ["", "soon", "1e3", "2026-02-30", "\u0663d"]
    assert all(_valid(v, schema) for v in allowed)
    assert not any(_valid(v, schema) for v in refused)

    async def main() -> tuple[list[int], list[int], int]:
        rt = Runtime(model=FunctionModel(lambda request: "Noted."), ledger=ledger,
                     transcript=Transcript(tmp_path / "transcript.jsonl"))
        app = create_app(rt, TOKENS, close_on_shutdown=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as c:
            session = (await c.post("/v1/messages", json={"text": "hi"},
                                    headers=auth(OPERATOR))).json()["session_id"]
            url = f"/v1/sessions/{session}/trail"

            async def status(value: str) -> int:
                r = await c.get(url, params={"since": value}, headers=auth(OPERATOR))
                return r.status_code
            limit = await c.get("/v1/sessions", params={"limit": "\u00b2"},
                                headers=auth(OPERATOR))
            return ([await status(v) for v in allowed], [await status(v) for v in refused],
                    limit.status_code)
    ok, bad, limit = run(main())
    assert ok == [200] * len(allowed) and bad == [422] * len(refused)
    assert limit == 422  # "²".isdigit(), and int("²") was a 500


def test_a_message_text_is_blank_in_the_document_exactly_when_the_server_says_so(
        ledger: Ledger, tmp_path: Path) -> None:
    schema = openapi.SCHEMAS["Message"]["properties"]["text"]
    texts = ["\x1f", " \u3000\t", "\ufeff", "a"]  # U+001F is space to Python, not to \s

    async def main() -> list[int]:
        rt = Runtime(model=FunctionModel(lambda request: "Noted."), ledger=ledger,
                     transcript=Transcript(tmp_path / "transcript.jsonl"))
        app = create_app(rt, TOKENS, close_on_shutdown=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as c:
            return [(await c.post("/v1/messages", json={"text": t},
                                  headers=auth(OPERATOR))).status_code for t in texts]
    statuses = run(main())
    assert [_valid(t, schema) for t in texts] == [False, False, True, True]
    assert statuses == [422, 422, 200, 200]
