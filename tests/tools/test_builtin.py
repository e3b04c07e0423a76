from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from overt.channels.transcript import Transcript
from overt.clock import to_iso
from overt.ledger.canonical import digest_text
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from overt.types import ModelResponse, Usage
from tests.conftest import ALLOW_ALL, RuntimeFactory, cli_message, run


def _priced(text: str, tokens_in: int, tokens_out: int, cost: float) -> ModelResponse:
    return ModelResponse(text, usage=Usage(tokens_in, tokens_out, cost), model="m-cheap")


def test_get_usage_totals_tokens_and_cost_per_route_and_model_from_the_ledger(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = make_runtime(ScriptedModel([
        _priced("one", 100, 10, 0.001), _priced("two", 200, 20, 0.002),
        {"tool_calls": [{"name": "get_usage", "arguments": {"period": "today"}}]}, "done",
    ]))
    for _ in range(3):
        run(runtime.respond(cli_message()))
    result = runtime.model.requests[-1].messages[-1].content  # type: ignore[attr-defined]
    usage = json.loads(result)
    assert usage["total_input_tokens"] == 300 and usage["total_output_tokens"] == 30
    assert usage["total_tokens"] == 330
    assert usage["total_cost_usd"] == 0.003
    assert usage["by_route_and_model"][0] == {
        "route": "default", "model": "m-cheap", "inferences": 2, "input_tokens": 300,
        "output_tokens": 30, "cost_usd": 0.003}


def test_get_usage_refuses_an_unknown_period_as_an_argument_error(
    make_runtime: RuntimeFactory,
) -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "get_usage",
                                            "arguments": {"period": "fortnight"}}]}, "ok"])
    run(make_runtime(model).respond(cli_message()))
    assert model.requests[1].messages[-1].content.startswith("tool_execution_error: TypeError")


def test_get_operational_state_reports_turns_today_and_the_last_error(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = make_runtime(ScriptedModel([
        {"tool_calls": [{"name": "no_such_tool"}]}, "first",
        {"tool_calls": [{"name": "get_operational_state"}]}, "second",
    ]))
    run(runtime.respond(cli_message()))
    run(runtime.respond(cli_message()))
    state = json.loads(runtime.model.requests[-1].messages[-1].content)  # type: ignore[attr-defined]
    assert state["turns_today"] == 2
    assert state["last_error"]["type"] == "unknown_tool"
    assert state["last_error"]["tool_name"] == digest_text("no_such_tool")
    assert state["pending_approvals"] == 0
    assert state["runtime_started_at"] == runtime.started_at
    assert state["ledger_started_at"] is not None


def test_get_usage_for_yesterday_totals_the_calendar_day_before_today_not_the_last_24h(
    tmp_path: Path,
) -> None:
    from overt.evals.seed import seed_past
    from overt.ledger.sqlite import SqliteLedger

    path = tmp_path / "ledger.db"
    usage = [{"model": "m", "route": "ops", "input_tokens": 10, "output_tokens": 1,
              "cost_usd": 0.5, "days_ago": 2},
             {"model": "m", "route": "ops", "input_tokens": 20, "output_tokens": 2,
              "cost_usd": 0.25, "days_ago": 1}]
    run(seed_past(path, {"usage": usage}))
    ledger = SqliteLedger.open(path)
    try:
        model = ScriptedModel([
            _priced("today's", 1000, 100, 9.0),  # an inference of today: not yesterday's
            {"tool_calls": [{"name": "get_usage", "arguments": {"period": "yesterday"}}]},
            "done"])
        runtime = Runtime(model=model, ledger=ledger, gate=ALLOW_ALL,
                          transcript=Transcript(tmp_path / "t.jsonl"))
        run(runtime.respond(cli_message()))
        run(runtime.respond(cli_message()))
        result = json.loads(model.requests[-1].messages[-1].content)
    finally:
        ledger.close_sync()
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    assert result["period"] == "yesterday"
    assert (result["since"], result["until"]) == (to_iso(midnight - timedelta(days=1)),
                                                  to_iso(midnight))
    assert result["total_input_tokens"] == 20 and result["total_cost_usd"] == 0.25
