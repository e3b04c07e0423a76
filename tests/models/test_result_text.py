"""The short rendering of a tool result that the local model answers from."""

from __future__ import annotations

import json

from overt.engine.dispatch import render_result
from overt.evals.figures import answer_figures, source_figures
from overt.models.result_text import brief

USAGE = {
    "period": "today", "since": "2026-11-25T00:00:00.000000Z",
    "total_input_tokens": 2313, "total_output_tokens": 31, "total_cost_usd": 0.0125,
    "inferences": 1,
    "by_route_and_model": [{"route": "default", "model": "m", "inferences": 1,
                            "input_tokens": 2313, "output_tokens": 31, "cost_usd": 0.0125}],
}


def test_a_usage_result_reads_as_labelled_lines() -> None:
    assert brief(render_result(USAGE)).splitlines() == [
        "period: today",
        "since: 2026-11-25 00:00 UTC",
        "total input tokens: 2313",
        "total output tokens: 31",
        "total cost: $0.0125",
        "inferences: 1",
        "by route and model: route default, model m (all of it)",
    ]


def test_a_breakdown_of_several_rows_keeps_every_row() -> None:
    rows = [{"model": "a", "cost_usd": 0.5}, {"model": "b", "cost_usd": 1e-05}]
    text = brief(json.dumps({"total_cost_usd": 0.50001, "by_model": rows}))
    assert text.splitlines() == ["total cost: $0.50001", "by model:",
                                 "- model a, cost $0.5", "- model b, cost $0.00001"]


TWO_MODELS = {
    "period": "30d", "total_cost_usd": 0.092, "total_tokens": 450, "inferences": 4,
    "by_route_and_model": [
        {"route": "default", "model": "openai:gpt-4o-mini", "cost_usd": 0.05},
        {"route": "escalation", "model": "anthropic:claude-sonnet-4", "cost_usd": 0.042}],
}


def test_a_question_naming_one_row_is_given_that_row_without_the_totals() -> None:
    """Asked what Claude cost, the 1.5B model answered with the total line or the first
    row; given only the named row, it answers with that row's cost."""
    for question in ("What has Claude cost me this month?", "How much did gpt-4o-mini cost?",
                     "What did the escalation route cost?", "claudeの今月のコストは?"):
        lines = brief(json.dumps(TWO_MODELS), question).splitlines()
        assert len([ln for ln in lines if ln.startswith("asked about: ")]) == 1, question
        assert not any("total" in ln or ln.startswith("- ") for ln in lines), lines
        assert "period: 30d" in lines


def test_a_question_naming_no_row_or_every_row_is_given_the_whole_result() -> None:
    whole = brief(json.dumps(TWO_MODELS))
    for question in ("What did I spend this month?", "Claude or gpt-4o-mini: which cost more?",
                     "Is the supported model list long?", ""):
        assert brief(json.dumps(TWO_MODELS), question) == whole, question
    assert "total cost: $0.092" in whole


def test_a_row_that_differs_from_the_totals_is_kept() -> None:
    text = brief(json.dumps({"total_cost_usd": 1.0, "by_day": [{"day": "d", "cost_usd": 0.5}]}))
    assert "- day d, cost $0.5" in text


def test_none_empty_lists_booleans_and_nested_objects() -> None:
    state = {"last_error": None, "pending": [], "healthy": True,
             "error": {"at": "2026-11-25T01:02:03.456789+00:00", "type": "Boom"}}
    assert brief(json.dumps(state)).splitlines() == [
        "last error: none", "pending: none", "healthy: yes",
        "error:", "  at: 2026-11-25 01:02 UTC", "  type: Boom"]


def test_a_memory_tools_success_flag_is_left_out_its_failure_kept() -> None:
    """Asked "do we have anything about Kubernetes?", the 1.5B model read an empty
    search's first line, ``ok: yes``, as the answer ("Yes, we have stored something")."""
    empty = {"ok": True, "results": [], "count": 0, "scope": "own"}
    assert brief(json.dumps(empty)).splitlines() == ["results: none", "count: 0", "scope: own"]
    failed = {"ok": False, "error": {"code": "not_found", "message": "no node"}}
    assert brief(json.dumps(failed)).splitlines()[0] == "ok: no"
    assert brief(json.dumps({"ok": True})) == "ok: yes"


def test_text_that_is_no_json_object_is_left_as_it_is() -> None:
    for content in ("not_found: no node", "[1, 2]", "{}", "42", '"text"'):
        assert brief(content) == content


def test_every_figure_of_the_brief_is_one_of_the_results() -> None:
    content = render_result(USAGE)
    pool = source_figures([content])
    assert all(f in pool for f in answer_figures(brief(content)))
