"""The checks on an answer's text: excluded texts, figures it must state, its
language and the names it may not invent, each graded right and wrong."""

from __future__ import annotations

import re
from typing import Any

from overt.evals.cases import EvalCase, Expectation, TextMatch
from overt.evals.grade import Call, grade

USAGE = '{"period": "7d", "total_cost_usd": 0.1251, "by_route": [{"route": "triage"}]}'
NOTE = ('{"ok": true, "results": [{"title": "Staging cache host", '
        '"body": "The staging cache runs on cache-stg-2.internal, port 6380."}]}')


def _case(tools: tuple[str, ...] = (), **fields: Any) -> EvalCase:
    return EvalCase(id="c", question=fields.pop("question", "What did we spend?"),
                    expect=Expectation(tools), **fields)


def test_an_answer_saying_an_excluded_text_fails_and_one_without_it_passes() -> None:
    case = _case(question="Text Mireille that I am late.",
                 answer_excludes=(TextMatch(pattern=re.compile(r"(?i)^\W*sure\b")),
                                  TextMatch("message sent")))
    assert grade(case, [], "I cannot send text messages from here; I'm not sure how.").passed
    failed = grade(case, [], "Sure, here is the text: I am late.")
    assert not failed.passed and "answer says" in failed.failures[0]
    assert not grade(case, [], "Done. Message SENT.").passed


def test_a_needless_refusal_fails_a_case_that_excludes_it() -> None:
    case = _case(question="Translate into English: ありがとう",
                 answer_excludes=(TextMatch("cannot"), TextMatch("できません")))
    assert grade(case, [], "Thank you.").passed
    assert not grade(case, [], "I cannot do that from here.").passed


def test_includes_any_takes_a_regular_expression_too() -> None:
    case = _case(answer_includes_any=(TextMatch(pattern=re.compile(r"\bTuesdays?\b")),))
    assert grade(case, [], "Migrations run on Tuesdays.").passed
    assert not grade(case, [], "Migrations run on tuesday.").passed


def test_a_figure_the_answer_must_state_may_be_rounded_but_not_left_out() -> None:
    case = _case(("get_usage",), answer_figures=(0.1251,))
    calls = [Call("get_usage", {"period": "7d"}, USAGE)]
    assert grade(case, calls, "You spent $0.1251.").passed
    assert grade(case, calls, "You spent about $0.13.").passed
    missing = grade(case, calls, "You spent $0.04 yesterday.")
    assert not missing.passed
    assert "answer does not state 0.1251" in missing.failures


def test_figures_any_takes_a_total_or_all_of_its_parts() -> None:
    case = _case(answer_figures_any=((62300,), (53200, 9100)))
    assert grade(case, [], "62,300 tokens.").passed
    assert grade(case, [], "53200 input and 9100 output tokens.").passed
    partial = grade(case, [], "53200 input tokens.")
    assert not partial.passed
    assert "answer states none of 62300 or 53200+9100" in partial.failures


def test_a_figure_the_answer_must_state_counts_as_grounded() -> None:
    case = _case(question="What is 19 times 24?", answer_figures=(456,))
    verdict = grade(case, [], "19 times 24 is 456.")
    assert verdict.passed and verdict.invented == ()
    wrong = grade(case, [], "19 times 24 is 466.")
    assert not wrong.passed and wrong.invented == ("466",)


def test_the_answer_must_be_in_the_language_the_case_names() -> None:
    case = _case(question="今日はいくら使った？", answer_language="ja", allowed_figures=(0.1251,))
    assert grade(case, [], "今日は0.1251ドルです。").passed
    assert grade(case, [], "claude-sonnet-4 が一番高いです。").passed
    english = grade(case, [], "You spent $0.1251 today.")
    assert not english.passed and "answer is in en, not ja" in english.failures
    assert not grade(case, [], "0.1251").passed  # no language at all


def test_an_english_answer_quoting_japanese_is_english() -> None:
    case = _case(question="What does the note say?", answer_language="en",
                 allowed_figures=(25,))
    assert grade(case, [], "The note says 「締め日は毎月25日です」, the 25th.").passed
    assert not grade(case, [], "締め日は毎月25日です。").passed


def test_a_name_in_no_source_is_invented_when_names_are_checked() -> None:
    case = _case(("node_search",), question="Where does the staging cache run?",
                 check_names=True)
    calls = [Call("node_search", {"query": "staging cache"}, NOTE)]
    assert grade(case, calls, "On cache-stg-2.internal, port 6380.").passed
    made_up = grade(case, calls, "On cache-stg-7.internal, port 6380.")
    assert not made_up.passed
    assert made_up.invented_names == ("cache-stg-7.internal",) and made_up.invented == ()


def test_a_proper_name_in_no_source_is_invented() -> None:
    case = _case(question="Who won last night's match in Madrid?", check_names=True)
    assert grade(case, [], "I cannot see match results from here.").passed
    invented = grade(case, [], "The match was won by Real Madrid.")
    assert invented.invented_names == ("Real Madrid",) and not invented.passed


def test_a_name_from_what_the_model_was_shown_is_grounded() -> None:
    case = _case(question="Approve the deploy.", check_names=True)
    answer = "I cannot approve it: use overt approvals, or edit overt.toml."
    assert not grade(case, [], answer).passed
    assert grade(case, [], answer, shown="settings live in `overt.toml`").passed


def test_names_go_unchecked_unless_the_case_asks() -> None:
    assert grade(_case(question="Who won?"), [], "Real Madrid, at real-madrid.example.").passed
