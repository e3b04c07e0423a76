"""Typed turn outcomes: each kind of :class:`TurnError` from a real path, recorded on
``turn.completed`` and read back, and the channels branching on its kind."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from overt.channels.http import create_app
from overt.channels.transcript import Transcript
from overt.channels.turns import turn_state
from overt.engine.budget import Budget
from overt.errors import ModelError
from overt.events import TURN_ERROR_KINDS, TurnCompleted, TurnStarted
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel, ScriptedModel
from overt.runtime import Runtime
from overt.tools.base import ToolContext, tool
from overt.types import ModelRequest, ModelResponse, ResponseResult, ToolCall, TurnError
from tests.channels.helpers import CLIENT, OPERATOR, TOKENS, USAGE_CALL, auth, make_runtime
from tests.conftest import ALLOW_ALL, cli_message, run


@tool
async def shut_down(ctx: ToolContext) -> str:
    """Closes the ledger mid-turn, as a process shutting down under a turn would."""
    await ctx.ledger.close()  # type: ignore[attr-defined]
    return "closed"


def _failing_model(request: ModelRequest) -> ModelResponse:
    raise ModelError("the provider is down")


def _turn(kind: str, ledger: Any, tmp_path: Path) -> ResponseResult:
    """One turn that ends in ``kind``, each by the path that makes it in use."""
    transcript = Transcript(tmp_path / "transcript.jsonl")
    if kind == "model_error":
        runtime = Runtime(model=FunctionModel(_failing_model), ledger=ledger,
                          transcript=transcript)
    elif kind == "budget_exceeded":
        runtime = Runtime(model=ScriptedModel(["never asked"]), ledger=ledger,
                          transcript=transcript, budget=Budget(session_tokens=1))
    else:
        model = ScriptedModel([ModelResponse("", (ToolCall("c1", "shut_down", {}),)),
                               "never asked"])
        runtime = Runtime(model=model, ledger=ledger, tools=[shut_down], gate=ALLOW_ALL,
                          transcript=transcript)
    return run(runtime.respond(cli_message("hello")))  # type: ignore[no-any-return]


def test_the_kinds_are_those_the_engine_makes() -> None:
    assert set(TURN_ERROR_KINDS) == {"model_error", "budget_exceeded", "ledger_error"}


@pytest.mark.parametrize("kind", TURN_ERROR_KINDS)
def test_each_kind_comes_from_a_real_path_and_reads_back_as_recorded(
        kind: str, ledger: Any, ledger_url: str, tmp_path: Path) -> None:
    result = _turn(kind, ledger, tmp_path)
    assert result.error is not None and result.error.kind == kind, result.error
    assert result.error.message and result.tools_used is None
    if kind == "ledger_error":
        # it stopped before its next effect: the ledger, reopened, has no end for it
        assert result.error.type == "LedgerClosed"
        again = open_ledger(ledger_url)
        try:
            assert run(again.entries(turn_id=result.turn_id, kinds=["turn.completed"])) == []
            assert "tool_call.completed" not in {
                e.kind for e in run(again.entries(turn_id=result.turn_id))}
        finally:
            run(again.close())
        return
    expected = {"model_error": TurnError("model_error", "the provider is down", "ModelError"),
                "budget_exceeded": TurnError("budget_exceeded", result.text, "session_tokens")}
    assert result.error == expected[kind]
    [entry] = run(ledger.entries(turn_id=result.turn_id, kinds=["turn.completed"]))
    done = entry.event(TurnCompleted)
    assert (done.status, done.error_kind, done.error_type) == (kind, kind, result.error.type)
    state = run(turn_state(ledger, result.turn_id))
    assert state is not None and state.ended and state.status == kind
    assert state.error == result.error
    assert state.to_dict()["error"] == result.error.to_dict() == result.to_dict()["error"]


def test_an_answered_turn_has_no_error_on_record_or_read_back(ledger: Any,
                                                              tmp_path: Path) -> None:
    runtime = make_runtime(ledger, tmp_path, ["Hi."])
    result = run(runtime.respond(cli_message("hello")))
    assert result.error is None
    done = run(ledger.entries(kinds=["turn.completed"]))[0].event(TurnCompleted)
    assert (done.error_kind, done.error_digest, done.error_type) == (None, None, None)
    state = run(turn_state(ledger, result.turn_id))
    assert state is not None and state.error is None and state.text == "Hi."


def test_a_turn_completed_written_before_error_kind_is_read_by_its_status(
        ledger: Any) -> None:
    """Entries recorded before ``error_kind`` and ``error_digest`` lack them (the entry's
    data as an older overt wrote it): the status is the kind, the type its message."""
    started = TurnStarted(turn_id="T1", session_id="S1", source="cli",
                          caller_session_id="cli:S1", message_digest="0" * 64, model="m",
                          route="default", max_tool_calls=5, actor="operator:default")
    old = TurnCompleted(turn_id="T1", session_id="S1", status="model_error",
                        reply_digest=None, tools_used=None, tool_calls=0, model_calls=1,
                        input_tokens=0, output_tokens=0, cost_usd=0.0, duration_ms=1.0,
                        error_type="KeyError")
    data = old.data()
    del data["error_kind"], data["error_digest"]
    run(ledger.record([started, _Raw(old, data)]))
    state = run(turn_state(ledger, "T1"))
    assert state is not None
    assert state.error == TurnError("model_error", "KeyError", "KeyError")
    completed = TurnCompleted(turn_id="T2", session_id="S1", status="tool_error_streak",
                              reply_digest=None, tools_used=[], tool_calls=3, model_calls=2,
                              input_tokens=0, output_tokens=0, cost_usd=0.0,
                              duration_ms=1.0)
    run(ledger.record([TurnStarted(**{**_fields(started), "turn_id": "T2"}), completed]))
    streak = run(turn_state(ledger, "T2"))
    assert streak is not None and streak.status == "tool_error_streak" and streak.error is None


# -- the channels branch on the kind ------------------------------------------------


def _client(runtime: Runtime) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(runtime, TOKENS)),
                             base_url="http://t")


def test_http_answers_a_ledger_error_503_and_a_model_error_as_the_answer(
        ledger: Any, tmp_path: Path) -> None:
    async def ask(runtime: Runtime) -> httpx.Response:
        async with _client(runtime) as c:
            return await c.post("/v1/messages", json={"text": "hi"}, headers=auth(CLIENT))

    failing = Runtime(model=FunctionModel(_failing_model), ledger=ledger,
                      transcript=Transcript(tmp_path / "t.jsonl"))
    answered = run(ask(failing))
    assert answered.status_code == 200
    assert answered.json()["error"] == {"kind": "model_error", "message": "the provider is down",
                                        "type": "ModelError"}
    model = ScriptedModel([ModelResponse("", (ToolCall("c1", "shut_down", {}),)), "never"])
    stopping = Runtime(model=model, ledger=ledger, tools=[shut_down], gate=ALLOW_ALL,
                       transcript=Transcript(tmp_path / "t.jsonl"))
    refused = run(ask(stopping))
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "ledger_unavailable"
    assert "stopped before its next step" in refused.json()["error"]["message"]


def test_a_held_turn_whose_resumed_part_fails_answers_the_waiting_request_with_its_kind(
        ledger: Any, tmp_path: Path) -> None:
    """The answer a waiting request reads back from the ledger (TurnState) carries the
    same typed error as the turn's own result."""
    replies: list[Any] = [USAGE_CALL, ModelError("gone after the approval")]

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with _client(make_runtime(ledger, tmp_path, replies)) as c:
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
            await c.post(f"/v1/approvals/{request_id}/approve", json={},
                         headers=auth(OPERATOR))
            answer = (await asyncio.wait_for(asking, 30)).json()
            turn = (await c.get(f"/v1/turns/{answer['turn_id']}",
                                headers=auth(OPERATOR))).json()
            return answer, turn

    answer, turn = run(main())
    assert answer["awaiting_approval"] is None
    assert answer["error"] == {"kind": "model_error", "message": "gone after the approval",
                               "type": "ModelError"}
    assert turn["status"] == "model_error" and turn["error"] == answer["error"]


class _Raw(TurnCompleted):
    """A turn.completed recorded with the data an older overt wrote (without the fields
    this one added)."""

    def __init__(self, event: TurnCompleted, data: dict[str, Any]) -> None:
        super().__init__(**_fields(event))
        object.__setattr__(self, "_old", data)

    def data(self) -> dict[str, Any]:
        return dict(self._old)  # type: ignore[attr-defined]


def _fields(event: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
