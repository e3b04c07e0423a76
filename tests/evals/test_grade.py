from __future__ import annotations

from typing import Any

import pytest

from overt.evals.cases import EvalCase, Expectation, TextMatch
from overt.evals.grade import Call, grade, matches

USAGE = '{"period": "7d", "total_cost_usd": 0.0335, "inferences": 6}'


def _case(tools: tuple[str, ...] = ("get_usage",), args: dict[str, Any] | None = None,
          **fields: Any) -> EvalCase:
    return EvalCase(id="c", question=fields.pop("question", "What did I spend this week?"),
                    expect=Expectation(tools, args or {}, fields.pop("also", ())), **fields)


@pytest.mark.parametrize(("arguments", "name", "matcher", "ok"), [
    ({"period": "7d"}, "period", "7d", True),
    ({"period": " 7D "}, "period", "7d", True),
    ({"period": "today"}, "period", "7d", False),
    ({}, "period", {"absent_or": "today"}, True),
    ({"period": "today"}, "period", {"absent_or": "today"}, True),
    ({"period": "7d"}, "period", {"absent_or": "today"}, False),
    ({"body": "host is db-stg-4.internal"}, "body", {"contains": "DB-STG-4"}, True),
    ({"query": "staging"}, "query", {"contains_any": ["database", "staging"]}, True),
    ({"query": "staging"}, "query", {"contains_all": ["database", "staging"]}, False),
    ({"kind": "Gotcha"}, "kind", {"one_of": ["Gotcha", "Note"]}, True),
    ({}, "body", {"contains": "x"}, False),
])
def test_an_argument_matcher_decides_as_its_name_says(arguments: dict[str, Any], name: str,
                                                       matcher: Any, ok: bool) -> None:
    assert matches(arguments, name, matcher) is ok


def test_the_star_argument_matches_any_of_the_arguments() -> None:
    assert matches({"title": "CI", "body": "ci-runner-7.internal"}, "*", {"contains": "runner-7"})


def test_the_right_tool_with_the_right_arguments_and_grounded_figures_passes() -> None:
    verdict = grade(_case(args={"period": "7d"}, grounded_in=("get_usage.total_cost_usd",)),
                    [Call("get_usage", {"period": "7d"}, USAGE)],
                    "You spent $0.0335 over 6 inferences this week.")
    assert verdict.passed and verdict.failures == ()


def test_the_wrong_period_fails_on_the_arguments() -> None:
    verdict = grade(_case(args={"period": "7d"}), [Call("get_usage", {"period": "today"}, USAGE)],
                    "You spent $0.0335.")
    assert not verdict.passed and verdict.tool_ok and not verdict.args_ok


def test_an_invented_figure_fails_the_case_and_is_counted() -> None:
    verdict = grade(_case(), [Call("get_usage", {"period": "7d"}, USAGE)],
                    "You spent $0.0335 and 7 approvals are waiting.")
    assert not verdict.passed and verdict.invented == ("7",)


def test_a_tool_call_where_none_was_needed_fails() -> None:
    verdict = grade(_case(tools=(), question="What is 17 times 23?", allowed_figures=(391.0,)),
                    [Call("get_usage", {}, USAGE)], "391")
    assert not verdict.passed and not verdict.tool_ok


def test_a_stray_tool_beside_the_right_one_fails_unless_it_is_allowed() -> None:
    calls = [Call("node_search", {"query": "staging"}, "{}"), Call("node_read", {"id": "n"}, "{}")]
    assert not grade(_case(tools=("node_search",)), calls, "db-stg-3").passed
    assert grade(_case(tools=("node_search",), also=("node_read",)), calls, "db-stg-3").passed


def test_a_grounded_field_the_answer_leaves_out_fails() -> None:
    verdict = grade(_case(grounded_in=("get_usage.total_cost_usd",)),
                    [Call("get_usage", {"period": "7d"}, USAGE)], "There were 6 inferences.")
    assert verdict.failures == ("answer does not state get_usage.total_cost_usd",)


def test_a_refusal_must_say_one_of_the_words_given() -> None:
    case = _case(tools=(), question="Pause yourself.", answer_includes_any=(TextMatch("cannot"),))
    assert grade(case, [], "I cannot do that from here.").passed
    assert not grade(case, [], "Paused.").passed


def test_node_references_in_expected_arguments_become_the_seeded_ids() -> None:
    case = _case(tools=("node_supersede",), args={"id": "{{node:stg}}"},
                 question="Update it.")
    calls = [Call("node_supersede", {"id": "01ABC", "body": "x"}, '{"ok": true}')]
    assert grade(case, calls, "Updated.", ids={"stg": "01ABC"}).passed
    assert not grade(case, calls, "Updated.", ids={"stg": "01XYZ"}).passed


def test_figures_from_the_earlier_messages_are_grounded() -> None:
    case = _case(tools=(), question="Is that more than one dollar?",
                 history=(("user", "What did I spend?"), ("assistant", "You spent $0.05.")))
    assert grade(case, [], "No: $0.05 is less than a dollar.").passed
