"""The cheap-first router: each signal, escalation on the record, a plugin replacing the rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overt.config import Config, Route
from overt.errors import ConfigError, UsageError
from overt.hooks import PluginHost
from overt.hooks.router import RouterPlugin
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.models.options import ModelAlias
from overt.models.resolve import ModelCatalog
from overt.models.router import (
    EscalationRule,
    escalation_context,
    self_reported_confidence,
    trailing_tool_errors,
)
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import Message, ModelRequest, ModelResponse, ToolCall
from tests.conftest import ALLOW_ALL, cli_message, run
from tests.hooks.conftest import records

RULE = EscalationRule()
ASK = ModelRequest((Message("user", "what is 2 + 2?"),))


def reason(text: str = "", *, calls: tuple[ToolCall, ...] = (),
           request: ModelRequest = ASK, rule: EscalationRule = RULE) -> str | None:
    decision = rule.assess(request, ModelResponse(text, calls))
    return None if decision is None else decision.reason_code


def test_a_confident_answer_is_not_escalated() -> None:
    assert reason("2 + 2 = 4.") is None
    assert reason("4 (confidence: high)") is None


def test_an_empty_answer_escalates() -> None:
    assert reason("   ") == "empty_answer"
    assert reason("", rule=EscalationRule(on_empty=False)) is None


def test_a_malformed_tool_call_escalates() -> None:
    bad = (ToolCall("c1", "lookup", {}, malformed="not JSON"),)
    assert reason(calls=bad) == "malformed_tool_call"
    assert reason(calls=bad, rule=EscalationRule(on_malformed_tool_call=False)) is None
    assert reason(calls=(ToolCall("c1", "lookup", {"key": "a"}),)) is None


def failing(n: int, *, then_ok: bool = False) -> ModelRequest:
    messages = [Message("user", "go")]
    for i in range(n):
        messages += [Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "t", {}),)),
                     Message("tool", "ToolError: no", tool_call_id=f"c{i}", is_error=True)]
    if then_ok:
        messages += [Message("tool", "fine", tool_call_id="ok")]
    return ModelRequest(tuple(messages))


def test_a_streak_of_failed_tool_calls_escalates() -> None:
    assert trailing_tool_errors(failing(2)) == 2
    assert reason("trying again", request=failing(2)) == "tool_error_streak"
    assert reason("trying again", request=failing(1)) is None
    assert reason("ok", request=failing(2, then_ok=True)) is None
    assert reason("x", request=failing(5), rule=EscalationRule(tool_error_streak=0)) is None


@pytest.mark.parametrize("text, value", [
    ("4 (confidence: low)", 0.25), ("Confidence: 0.3", 0.3), ("confidence = 20%", 0.2),
    ("my confidence level is very high", 0.95), ("confidence: 70", 0.7)])
def test_self_reported_confidence_is_read_in_its_usual_forms(text: str, value: float) -> None:
    assert self_reported_confidence(text) == pytest.approx(value)


def test_a_self_reported_confidence_below_the_threshold_escalates() -> None:
    assert reason("It is 4. (confidence: 0.3)") == "low_confidence_self_reported"
    assert reason("It is 4. (confidence: 0.6)") is None
    assert reason("It is 4. (confidence: 0.6)",
                  rule=EscalationRule(confidence_below=0.8)) == "low_confidence_self_reported"
    assert reason("(confidence: 0.1)", rule=EscalationRule(confidence_below=0)) is None


def test_a_hedging_phrase_escalates_and_the_phrases_are_configurable() -> None:
    assert reason("I'm not sure, but maybe 5?") == "low_confidence_hedging"
    assert reason("i don't know") == "low_confidence_hedging"
    assert reason("Perhaps 4.") is None
    assert reason("Perhaps 4.", rule=EscalationRule(hedges=(r"\bperhaps\b",))) == \
        "low_confidence_hedging"
    assert reason("I'm not sure", rule=EscalationRule(hedges=())) is None


def test_an_invalid_hedge_or_threshold_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="hedges\\[0\\]"):
        EscalationRule(hedges=("(",))
    with pytest.raises(ConfigError):
        EscalationRule(confidence_below=1.5)


def test_the_strong_model_reads_the_cheap_answer_and_why_it_was_not_trusted() -> None:
    response = ModelResponse("maybe 5?", (ToolCall("c", "lookup", {"key": "k"}),))
    decision = RULE.assess(ASK, ModelResponse("I'm not sure"))
    assert decision is not None
    context = escalation_context(response, decision)
    assert "maybe 5?" in context and 'lookup {"key": "k"}' in context
    assert "the answer hedged" in context


# -- on the record -----------------------------------------------------------------------


def routed(ledger: Ledger, cheap: ScriptedModel, strong: ScriptedModel,
           rule: EscalationRule = RULE, **kwargs: Any) -> Runtime:
    host = PluginHost.builtin_only()
    host.register(RouterPlugin("strong", rule, cheap=cheap.name), "router")
    catalog = ModelCatalog([strong])
    return Runtime(model=cheap, ledger=ledger, plugins=host, models=catalog, gate=ALLOW_ALL,
                   **kwargs)


def test_a_hedged_answer_is_reissued_to_the_strong_model_and_both_are_on_the_record(
    ledger: Ledger,
) -> None:
    cheap = ScriptedModel(["I'm not sure, maybe 5?"], name="cheap")
    strong = ScriptedModel(["4"], name="strong")
    result = run(routed(ledger, cheap, strong).respond(cli_message("what is 2 + 2?")))
    assert result.text == "4"
    kinds = [e.kind for e in run(ledger.entries(turn_id=result.turn_id))]
    first = kinds.index("inference")
    assert kinds[first:first + 3] == ["inference", "hook.reissued", "inference"]
    inferences = records(ledger, "inference")
    assert [(i["model"], i["escalated"]) for i in inferences] == [("cheap", False),
                                                                  ("strong", True)]
    assert [i["escalation_reason"] for i in inferences] == [None, "low_confidence_hedging"]
    reissued = records(ledger, "hook.reissued")
    assert [(r["plugin"], r["from_model"], r["to_model"], r["reason_code"])
            for r in reissued] == [("router", "cheap", "strong", "low_confidence_hedging")]
    context = run(ledger.content(reissued[0]["context_digest"]))
    assert "I'm not sure, maybe 5?" in context
    assert strong.requests[0].messages[-1].content == context
    assert run(ledger.verify()).ok


def test_a_confident_cheap_answer_is_not_escalated(ledger: Ledger) -> None:
    cheap = ScriptedModel(["4"], name="cheap")
    strong = ScriptedModel(["should not be asked"], name="strong")
    result = run(routed(ledger, cheap, strong).respond(cli_message()))
    assert result.text == "4" and strong.requests == []
    assert [i["escalated"] for i in records(ledger, "inference")] == [False]
    assert records(ledger, "hook.reissued") == []


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def test_each_iteration_escalates_at_most_once_even_when_the_strong_answer_hedges(
    ledger: Ledger,
) -> None:
    cheap = ScriptedModel([{"text": "I don't know", "tool_calls": []},
                           "(confidence: 0.2) it is v"], name="cheap")
    strong = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}]},
                            "I'm not sure either"], name="strong")
    result = run(routed(ledger, cheap, strong, tools=[lookup]).respond(cli_message()))
    assert result.text == "I'm not sure either"  # the reissued answer is not judged again
    assert result.tools_used == ["lookup"]
    assert [(i["model"], i["escalated"]) for i in records(ledger, "inference")] == [
        ("cheap", False), ("strong", True), ("cheap", False), ("strong", True)]
    assert [r["reason_code"] for r in records(ledger, "hook.reissued")] == [
        "low_confidence_hedging", "low_confidence_self_reported"]


# -- composed from config ----------------------------------------------------------------


def scripted(tmp_path: Path, name: str, *replies: str) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"text": r}) + "\n" for r in replies))
    return f"scripted:{path}"


def configured(ledger_url: str, tmp_path: Path, cheap: str, strong: str,
               **changes: Any) -> Config:
    return Config(db=ledger_url, transcript="", route="cheap", model="cheap",
                  model_aliases={"cheap": ModelAlias(cheap), "strong": ModelAlias(strong)},
                  routes={"cheap": Route(model="cheap", escalate_to="strong")}, **changes)


def test_a_route_with_escalate_to_registers_the_router(ledger_url: str,
                                                       tmp_path: Path) -> None:
    cheap = scripted(tmp_path, "cheap", "I might be wrong: 5")
    strong = scripted(tmp_path, "strong", "4")
    runtime = Runtime.from_config(configured(ledger_url, tmp_path, cheap, strong))
    try:
        assert "router" in runtime.plugins.names
        result = run(runtime.respond(cli_message()))
        assert result.text == "4"
        inferences = run(runtime.ledger.entries(kinds=["inference"]))
        assert [e.data["escalated"] for e in inferences] == [False, True]
    finally:
        run(runtime.close())


RULE_PLUGIN = '''
from overt.hooks import Reissue, hookimpl

@hookimpl
def post_llm_call_can_reissue(response, model):
    if "banana" in response.text:
        return Reissue(model="strong", context="no bananas", reason_code="fruit")
    return None
'''


def test_a_plugin_replaces_the_rule_when_the_router_is_disabled(ledger_url: str,
                                                                tmp_path: Path) -> None:
    plugin = tmp_path / "fruit.py"
    plugin.write_text(RULE_PLUGIN)
    cheap = scripted(tmp_path, "cheap", "I'm not sure", "banana")
    strong = scripted(tmp_path, "strong", "4")
    config = configured(ledger_url, tmp_path, cheap, strong, plugins_enabled=("fruit",),
                        plugins_disabled=("router",), plugin_files=(str(plugin),))
    runtime = Runtime.from_config(config)
    try:
        assert "router" not in runtime.plugins.names
        hedged = run(runtime.respond(cli_message()))
        assert hedged.text == "I'm not sure"  # the router's rule no longer applies
        fruit = run(runtime.respond(cli_message()))
        assert fruit.text == "4"
        reissued = run(runtime.ledger.entries(kinds=["hook.reissued"]))
        assert [(e.data["plugin"], e.data["reason_code"]) for e in reissued] == [
            ("fruit", "fruit")]
    finally:
        run(runtime.close())


def test_an_enabled_plugin_that_answers_is_asked_before_the_router(ledger_url: str,
                                                                   tmp_path: Path) -> None:
    plugin = tmp_path / "fruit.py"
    plugin.write_text(RULE_PLUGIN)
    cheap = scripted(tmp_path, "cheap", "I'm not sure: banana")
    strong = scripted(tmp_path, "strong", "4")
    config = configured(ledger_url, tmp_path, cheap, strong, plugins_enabled=("fruit",),
                        plugin_files=(str(plugin),))
    runtime = Runtime.from_config(config)
    try:
        run(runtime.respond(cli_message()))
        reissued = run(runtime.ledger.entries(kinds=["hook.reissued"]))
        assert [e.data["plugin"] for e in reissued] == ["fruit"]
    finally:
        run(runtime.close())


def test_a_route_offers_only_its_tools(ledger_url: str, tmp_path: Path) -> None:
    cheap = scripted(tmp_path, "cheap", "4")
    config = configured(ledger_url, tmp_path, cheap, cheap).with_(
        routes={"cheap": Route(model="cheap", tools=("get_usage",))})
    runtime = Runtime.from_config(config)
    try:
        assert runtime.tools.names == ["get_usage"]
    finally:
        run(runtime.close())
    with pytest.raises(UsageError, match="nope"):
        Runtime.from_config(config.with_(db=str(tmp_path / "other.db"),
                                         routes={"cheap": Route(tools=("nope",))}))
