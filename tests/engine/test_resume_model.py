"""A turn paused for approval finishes on the model it ran on, wherever it is approved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overt.engine.values import EngineSettings
from overt.events import InferenceRecorded, ToolCallCompleted
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel, ScriptedModel
from overt.models.resolve import ModelCatalog
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from tests.conftest import cli_message, run
from tests.policy.helpers import PAY, effect_tools, runs_of


def _runtime(url: str, log: Path, model: Any, *, spec: str | None,
             catalog: ModelCatalog | None = None) -> Runtime:
    return Runtime(model=model, ledger=open_ledger(url), tools=effect_tools(log),
                   gate=Gate(Policy([]), Capabilities()), models=catalog,
                   settings=EngineSettings(model_spec=spec))


def _inference_models(ledger: Any, turn_id: str) -> list[str]:
    return [e.event(InferenceRecorded).model
            for e in run(ledger.entries(turn_id=turn_id, kinds=["inference"]))]


def test_a_turn_approved_where_another_model_is_configured_finishes_on_its_own(
    ledger_url: str, tmp_path: Path,
) -> None:
    log = tmp_path / "payments"
    server_model = ScriptedModel([PAY], name="model-a")
    server = _runtime(ledger_url, log, server_model, spec="model-a")
    paused = run(server.respond(cli_message("pay bob")))
    assert paused.awaiting_approval
    run(server.close())

    own = FunctionModel(lambda r: "Paid bob, said model A.", name="model-a")
    other = FunctionModel(lambda r: "I am model B.", name="model-b")
    approver = _runtime(ledger_url, log, other, spec="model-b", catalog=ModelCatalog([own]))
    try:
        resumed = run(approver.approve(paused.awaiting_approval))
        assert resumed.handed_back is None
        assert resumed.result is not None and resumed.result.text == "Paid bob, said model A."
        assert other.requests == [] and len(own.requests) == 1
        assert runs_of(log) == ["500 bob"]
        assert _inference_models(approver.ledger, paused.turn_id) == ["model-a", "model-a"]
    finally:
        run(approver.close())


def test_a_process_that_cannot_build_the_model_hands_the_turn_back(
    ledger_url: str, tmp_path: Path,
) -> None:
    log = tmp_path / "payments"
    server = _runtime(ledger_url, log, ScriptedModel([PAY], name="model-a"), spec="model-a")
    paused = run(server.respond(cli_message("pay bob")))
    run(server.close())

    other = FunctionModel(lambda r: "I am model B.", name="model-b")
    approver = _runtime(ledger_url, log, other, spec="model-b", catalog=ModelCatalog([other]))
    try:
        resumed = run(approver.approve(paused.awaiting_approval))
        assert resumed.result is None and resumed.request.status == "approved"
        assert resumed.handed_back is not None and "'model-a'" in resumed.handed_back
        assert "will answer the turn" in resumed.handed_back
        assert other.requests == [] and runs_of(log) == []
        assert not run(approver.approvals.get(paused.awaiting_approval)).resumed
    finally:
        run(approver.close())

    own = FunctionModel(lambda r: "Paid, on model A.", name="model-a")
    able = _runtime(ledger_url, log, own, spec="model-a")
    try:
        done = run(able.resume_pending())
        assert [d.result.text for d in done if d.result is not None] == ["Paid, on model A."]
        assert runs_of(log) == ["500 bob"]
    finally:
        run(able.close())


def test_the_cap_of_a_response_holds_across_a_pause_for_approval(
    ledger_url: str, tmp_path: Path,
) -> None:
    from tests.policy.helpers import runtime

    log = tmp_path / "payments"
    look = {"name": "lookup", "arguments": {"query": "q"}}
    pay = PAY["tool_calls"][0]
    first = runtime(open_ledger(ledger_url), log,
                    [{"tool_calls": [look, pay, look, look, look, look]}])
    paused = run(first.respond(cli_message("pay and look")))
    run(first.close())
    second = runtime(open_ledger(ledger_url), log, [{"tool_calls": [look]}, "done"])
    try:
        resumed = run(second.approve(paused.awaiting_approval))
        assert resumed.result is not None and resumed.result.text == "done"
        statuses = [e.event(ToolCallCompleted).tool_status for e in run(second.ledger.entries(
            turn_id=paused.turn_id, kinds=["tool_call.completed"]))]
        assert statuses[:6] == ["ok"] * 5 + ["not_allowed"]
    finally:
        run(second.close())
