"""Budgets stop a turn before the call that would exceed them; the model sees them."""

from __future__ import annotations

from typing import Any

from overt.engine.budget import Budget
from overt.events import InferenceRecorded
from overt.models.fake import ScriptedModel
from overt.models.pricing import PriceTable
from overt.runtime import Runtime
from overt.types import ModelResponse, ToolCall, Usage
from tests.conftest import cli_message, run


def _runtime(ledger: Any, model: ScriptedModel, budget: Budget,
             prices: dict[str, tuple[float, float]] | None = None) -> Runtime:
    # Only the two usage tools are offered: the token estimates below assume their specs.
    return Runtime(model=model, ledger=ledger, budget=budget, prices=PriceTable(prices),
                   allowed_tools=["get_operational_state", "get_usage"])


def _calls_then_answer(tokens: int, model: str = "scripted") -> list[ModelResponse]:
    return [
        ModelResponse("", (ToolCall("c1", "get_operational_state", {}),),
                      Usage(tokens, 0), model, "tool_use"),
        ModelResponse("done", (), Usage(tokens, 0), model),
    ]


def test_a_session_token_budget_stops_the_turn_before_the_call_that_would_exceed_it(
    ledger: Any,
) -> None:
    model = ScriptedModel(_calls_then_answer(1500))
    runtime = _runtime(ledger, model, Budget(session_tokens=2000))
    result = run(runtime.respond(cli_message("check the state")))
    assert len(model.requests) == 1  # the second call was never made
    assert result.error is not None and result.error.kind == "budget_exceeded"
    assert result.error.type == "session_tokens" and result.error.message == result.text
    assert result.tools_used is None
    assert "this session's token budget" in result.text and "1,500 of 2,000" in result.text
    completed = run(ledger.entries(kinds=["turn.completed"]))[0].data
    assert completed["status"] == "budget_exceeded"
    assert run(ledger.verify()).ok


def test_a_day_budget_counts_every_session_of_the_day(ledger: Any) -> None:
    model = ScriptedModel([ModelResponse("first", (), Usage(900, 0), "scripted"),
                           ModelResponse("second", (), Usage(900, 0), "scripted")])
    runtime = _runtime(ledger, model, Budget(day_tokens=2000))
    assert run(runtime.respond(cli_message("a", session="one"))).error is None
    refused = run(runtime.respond(cli_message("b", session="two")))
    assert refused.error is not None and len(model.requests) == 1
    assert (refused.error.kind, refused.error.type) == ("budget_exceeded", "day_tokens")


def test_a_dollar_budget_uses_the_price_table(ledger: Any) -> None:
    prices = {"priced-model": (4.0, 4.0), "scripted": (4.0, 4.0)}
    # 100,000 tokens at $4 per million: $0.40 spent; the next call needs about $0.005
    tight = ScriptedModel(_calls_then_answer(100_000, model="priced-model"))
    refused = run(_runtime(ledger, tight, Budget(session_usd=0.401), prices).respond(
        cli_message(session="tight")))
    assert run(ledger.entries(kinds=["inference"]))[0].event(InferenceRecorded).cost_usd == 0.4
    assert refused.error is not None and len(tight.requests) == 1
    assert (refused.error.kind, refused.error.type) == ("budget_exceeded", "session_usd")
    roomy = ScriptedModel(_calls_then_answer(100_000, model="priced-model"))
    done = run(_runtime(ledger, roomy, Budget(session_usd=0.5), prices).respond(
        cli_message(session="roomy")))
    assert done.error is None and done.text == "done" and done.usage.cost_usd == 0.8


def test_the_model_sees_its_budget_in_its_context(ledger: Any) -> None:
    model = ScriptedModel(["fine"])
    run(_runtime(ledger, model, Budget(session_tokens=5000, day_usd=2.0)).respond(
        cli_message()))
    system = model.requests[0].messages[0].content
    assert "## Budget" in system
    assert "this session, tokens: 0 used of 5,000" in system
    assert "today, dollars: $0.0000 used of $2.0000" in system


def test_without_a_budget_nothing_is_checked_or_shown(ledger: Any) -> None:
    model = ScriptedModel(["fine"])
    run(_runtime(ledger, model, Budget()).respond(cli_message()))
    assert "## Budget" not in model.requests[0].messages[0].content


def test_each_inference_is_priced_when_the_adapter_did_not(ledger: Any) -> None:
    model = ScriptedModel([ModelResponse("x", (), Usage(1_000_000, 500_000),
                                         "anthropic:claude-sonnet-4-20250514")])
    result = run(_runtime(ledger, model, Budget()).respond(cli_message()))
    (inference,) = run(ledger.entries(kinds=["inference"]))
    assert inference.event(InferenceRecorded).cost_usd == 10.5  # $3 in + $7.50 out
    assert result.usage.cost_usd == 10.5
