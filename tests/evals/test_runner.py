"""The runner against fake models, on real ledgers: what it sees, grades and records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overt.config import Config
from overt.evals.cases import load_cases, parse_cases, shipped_path
from overt.evals.runner import percentile, run_suite
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.types import ModelRequest
from tests.conftest import run

SEED = {"usage": [{"model": "openai:gpt-4o-mini", "route": "support", "input_tokens": 1500,
                   "output_tokens": 400, "cost_usd": 0.0125, "count": 4}],
        "pending_approvals": [{"tool_name": "deploy"}, {"tool_name": "send_email"}],
        "memory": [{"ref": "stg", "kind": "Note", "title": "Staging database host",
                    "body": "The staging database runs on db-stg-3.internal."}]}


def _cases(*cases: dict[str, Any]) -> list[Any]:
    return parse_cases({"format": "overt-eval/1", "seed": SEED, "cases": list(cases)})


def _results(request: ModelRequest) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in request.messages if m.role == "tool"]


def _operator(request: ModelRequest) -> Any:
    """Calls the tool the question names, then answers from what it returned."""
    question = next(m.content for m in reversed(request.messages) if m.role == "user")
    results = _results(request)
    if "approvals" in question:
        if not results:
            return {"tool_calls": [{"name": "get_operational_state", "arguments": {}}]}
        return f"{results[0]['pending_approvals']} approvals are waiting."
    if "spend" in question:
        if not results:
            return {"tool_calls": [{"name": "get_usage", "arguments": {"period": "7d"}}]}
        return f"You spent ${results[0]['total_cost_usd']} and 4242 approvals wait."
    if "Update" in question:
        node = next(m.content for m in request.messages if m.role == "assistant").split()[1]
        if not results:
            return {"tool_calls": [{"name": "node_supersede",
                                    "arguments": {"id": node, "body": "db-stg-4.internal"}}]}
        return "Updated."
    return "17 times 23 is 401."


def _config(tmp_path: Path) -> Config:
    return Config(db=str(tmp_path / "main.db"))


def test_each_case_is_graded_on_tools_arguments_and_figures(tmp_path: Path) -> None:
    cases = _cases(
        {"id": "approvals", "question": "How many approvals are waiting?",
         "expect": {"tool": "get_operational_state"},
         "grounded_in": ["get_operational_state.pending_approvals"]},
        {"id": "spend", "question": "What did I spend this week?",
         "expect": {"tool": "get_usage", "args": {"period": "7d"}}},
        {"id": "math", "question": "What is 17 times 23?", "expect": {"tool": None},
         "allowed_figures": [391]},
    )
    suite = run(run_suite(FunctionModel(_operator), cases, _config(tmp_path)))
    verdicts = {r.case.id: r.grade for r in suite.results}
    assert verdicts["approvals"].passed
    assert verdicts["spend"].tool_ok and verdicts["spend"].args_ok
    assert verdicts["spend"].invented == ("4242",)
    assert verdicts["math"].invented == ("401",)
    summary = suite.summary()
    assert (summary["cases"], summary["passed"], summary["invented_figures"]) == (3, 1, 2)
    assert summary["cases_with_invented"] == 2


def test_every_case_starts_from_its_own_seeded_ledger(tmp_path: Path) -> None:
    ask = {"question": "How many approvals are waiting?",
           "expect": {"tool": "get_operational_state"}}
    cases = _cases({"id": "a", **ask}, {"id": "b", **ask})
    suite = run(run_suite(FunctionModel(_operator), cases, _config(tmp_path)))
    assert [r.answer for r in suite.results] == ["2 approvals are waiting."] * 2


def test_a_follow_up_names_the_seeded_node_by_its_id(tmp_path: Path) -> None:
    cases = _cases({
        "id": "supersede", "question": "Update it: db-stg-4.internal now.",
        "history": [{"role": "user", "content": "Where is staging?"},
                    {"role": "assistant", "content": "Node {{node:stg}} says db-stg-3."}],
        "expect": {"tool": "node_supersede",
                   "args": {"id": "{{node:stg}}", "*": {"contains": "db-stg-4"}}}})
    suite = run(run_suite(FunctionModel(_operator), cases, _config(tmp_path)))
    [result] = suite.results
    assert result.grade.passed, result.grade.failures
    assert json.loads(result.calls[0].result or "{}")["ok"] is True


def test_the_suites_record_names_the_model_the_prompt_and_the_figures(tmp_path: Path) -> None:
    cases = _cases({"id": "math", "question": "What is 17 times 23?",
                    "expect": {"tool": None}})
    suite = run(run_suite(FunctionModel(_operator, name="fn"), cases, _config(tmp_path)))
    event = suite.event()
    assert (event.model, event.cases, event.passed, event.invented_figures) == ("fn", 1, 0, 1)
    assert event.prompt_sha256.startswith("sha256:") and event.cases_sha256.startswith("sha256:")

    async def recorded() -> list[Any]:
        ledger = open_ledger(str(tmp_path / "main.db"))
        try:
            await ledger.record([event])
            return await ledger.entries(kinds=["eval.completed"])
        finally:
            await ledger.close()

    [entry] = run(recorded())
    assert entry.data["prompt_sha256"] == event.prompt_sha256 and entry.data["passed"] == 0


@pytest.mark.slow
def test_the_shipped_suite_runs_end_to_end_on_a_model_that_never_calls_a_tool(
        tmp_path: Path) -> None:
    cases = load_cases()
    suite = run(run_suite(FunctionModel(lambda request: "I cannot do that from here."),
                          cases, _config(tmp_path)))
    assert len(suite.results) == len(cases)
    assert all(r.error is None for r in suite.results)
    no_tool = [c for c in cases if not c.expect.tools and not c.allowed_figures]
    assert suite.passed >= len([c for c in no_tool if c.answer_includes_any])


@pytest.mark.slow
def test_the_held_out_set_seeds_and_runs_end_to_end(tmp_path: Path) -> None:
    """Its seed (the suite's, plus a link) is valid: every case runs without an error."""
    cases = load_cases(shipped_path().with_name("heldout.json"))
    suite = run(run_suite(FunctionModel(lambda request: "I cannot do that from here."),
                          cases, _config(tmp_path)))
    assert [r.error for r in suite.results] == [None] * len(cases)
    refusals = [c for c in cases if c.category == "refuse"]
    assert refusals and suite.passed >= len(refusals)


def test_the_latency_quantiles_are_nearest_rank() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert percentile([float(n) for n in range(1, 21)], 0.95) == 19.0
    assert percentile([], 0.5) == 0.0


class _Closing:
    name = "closing"

    def __init__(self) -> None:
        self.closed = 0

    async def complete(self, request: ModelRequest) -> Any:
        from overt.types import ModelResponse

        return ModelResponse(text="Hello.")

    async def aclose(self) -> None:
        self.closed += 1


def test_the_model_stays_open_between_cases_for_the_caller_to_close(tmp_path: Path) -> None:
    model = _Closing()
    ask = {"question": "Hi", "expect": {"tool": None}}
    run(run_suite(model, _cases({"id": "a", **ask}, {"id": "b", **ask}), _config(tmp_path)))
    assert model.closed == 0


def test_the_prompt_digest_changes_with_a_tool_description(
        tmp_path: Path, monkeypatch: Any) -> None:
    from overt.tools.registry import ToolRegistry
    from overt.types import ToolSpec
    cases = _cases({"id": "math", "question": "What is 17 times 23?",
                    "expect": {"tool": None}})
    model = FunctionModel(_operator, name="fn")
    first = run(run_suite(model, cases, _config(tmp_path / "a"))).prompt_sha256
    again = run(run_suite(model, cases, _config(tmp_path / "b"))).prompt_sha256
    assert first == again  # the same prompt and tools: the same digest
    specs = ToolRegistry.specs

    def reworded(self: ToolRegistry) -> tuple[ToolSpec, ...]:
        return tuple(ToolSpec(s.name, s.description + " Reworded.", s.input_schema,
                              s.read_only) for s in specs(self))

    monkeypatch.setattr(ToolRegistry, "specs", reworded)
    assert run(run_suite(model, cases, _config(tmp_path / "c"))).prompt_sha256 != first


def test_the_prompt_digest_covers_what_the_model_adds_to_the_tool_listing(
        tmp_path: Path) -> None:
    from overt.types import ToolSpec
    cases = _cases({"id": "math", "question": "What is 17 times 23?",
                    "expect": {"tool": None}})

    class Listing(FunctionModel):
        extra: tuple[ToolSpec, ...] = ()

        def shown_tools(self, offered: Any) -> tuple[ToolSpec, ...]:
            return (*offered, *self.extra)

    model = Listing(_operator, name="fn")
    plain = run(run_suite(FunctionModel(_operator, name="fn"), cases,
                          _config(tmp_path / "a"))).prompt_sha256
    assert run(run_suite(model, cases, _config(tmp_path / "b"))).prompt_sha256 == plain
    model.extra = (ToolSpec("cannot_do", "No tool does it.", {"type": "object"}),)
    assert run(run_suite(model, cases, _config(tmp_path / "c"))).prompt_sha256 != plain


PAST = {"usage": [{"model": "m", "route": "ops", "cost_usd": 0.25, "count": 2},
                  {"model": "m", "route": "ops", "cost_usd": 0.125, "days_ago": 1},
                  {"model": "m", "route": "ops", "cost_usd": 1.0, "days_ago": 2}],
        "memory": [{"ref": "relay", "kind": "Note", "title": "Mail relay",
                    "body": "Mail goes through smtp-relay-1.internal."},
                   {"ref": "relay-2", "revises": "relay",
                    "body": "Mail moved to smtp-relay-4.internal."}]}


def _by_day(request: ModelRequest) -> Any:
    """Reads the week per day and answers with yesterday's row (a calendar day)."""
    from datetime import UTC, datetime, timedelta
    results = _results(request)
    if not results:
        return {"tool_calls": [{"name": "get_usage", "arguments": {"period": "7d", "by": "day"}}]}
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    [row] = [r for r in results[0]["by_day"] if r["day"] == yesterday]
    return f"Yesterday you spent ${row['cost_usd']}."


def test_usage_seeded_days_ago_lies_on_that_calendar_day(tmp_path: Path) -> None:
    ask = {"question": "What did I spend yesterday?", "expect": {"tool": "get_usage"},
           "answer_figures": [0.125]}
    cases = parse_cases({"format": "overt-eval/1", "seed": PAST,
                         "cases": [{"id": "yesterday", **ask}]})
    [right] = run(run_suite(FunctionModel(_by_day), cases, _config(tmp_path / "a"))).results
    assert right.grade.passed, right.grade.failures

    def last_day(request: ModelRequest) -> Any:
        results = _results(request)
        if not results:
            return {"tool_calls": [{"name": "get_usage", "arguments": {"period": "24h"}}]}
        return f"You spent ${results[0]['total_cost_usd']}."

    [wrong] = run(run_suite(FunctionModel(last_day), cases, _config(tmp_path / "b"))).results
    assert not wrong.grade.passed and "answer does not state 0.125" in wrong.grade.failures


def test_a_seeded_revision_is_what_memory_finds(tmp_path: Path) -> None:
    def search(request: ModelRequest) -> Any:
        results = _results(request)
        if not results:
            return {"tool_calls": [{"name": "node_search", "arguments": {"query": "mail"}}]}
        return " / ".join(r["body"] for r in results[0]["results"])

    cases = parse_cases({"format": "overt-eval/1", "seed": PAST, "cases": [
        {"id": "relay", "question": "Which mail relay?", "expect": {"tool": "node_search"},
         "answer_includes_any": ["smtp-relay-4"], "answer_excludes": ["smtp-relay-1"]}]})
    [result] = run(run_suite(FunctionModel(search), cases, _config(tmp_path))).results
    assert result.grade.passed, (result.answer, result.grade.failures)


@pytest.mark.slow
def test_the_locked_set_seeds_and_runs_end_to_end(tmp_path: Path) -> None:
    """Every case runs without an error; a blanket refusal passes the English cases of
    what overt cannot do and fails every request that needed no tool."""
    cases = load_cases(shipped_path().with_name("locked.json"))
    suite = run(run_suite(FunctionModel(lambda request: "I cannot do that from here."),
                          cases, _config(tmp_path)))
    assert [r.error for r in suite.results] == [None] * len(cases)
    by_class: dict[tuple[str, str], list[bool]] = {}
    for r in suite.results:
        by_class.setdefault((r.case.category, r.case.lang), []).append(r.grade.passed)
    assert all(by_class[("cannot", "en")]) and not any(by_class[("no_tool", "en")])
    assert suite.summary()["invented_names"] == 0
