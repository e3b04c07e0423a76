"""The parser: every heuristic in both languages, and that it is total and gapless."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overt.events import REASONING_PHASES
from overt.reasoning.parse import ParsedStep, parse_steps


def phases(text: str) -> list[tuple[str, str]]:
    return [(s.phase, s.content) for s in parse_steps(text)]


# -- bracket markers ----------------------------------------------------------


def test_japanese_bracket_markers_map_to_their_phases() -> None:
    text = ("[思考] 残高を先に確認する。\n[計画] 1. check_credits 2. check_inbox\n"
            "[承認待ち] 送金は承認が要る\n[実行] check_credits -> ok\n[エラー] 受信箱に届かない")
    assert phases(text) == [
        ("thinking", "残高を先に確認する。"), ("plan", "1. check_credits 2. check_inbox"),
        ("waiting_approval", "送金は承認が要る"), ("execute", "check_credits -> ok"),
        ("error", "受信箱に届かない")]


def test_english_bracket_markers_map_to_their_phases_in_any_case() -> None:
    text = ("[thinking] check first [PLAN] call a then b [Waiting_Approval] needs an ok "
            "[execute] a -> ok [error] b timed out")
    assert phases(text) == [
        ("thinking", "check first"), ("plan", "call a then b"),
        ("waiting_approval", "needs an ok"), ("execute", "a -> ok"), ("error", "b timed out")]


def test_full_width_brackets_and_spelled_out_waiting_approval_are_markers() -> None:
    assert phases("【思考】考える【計画】手順\n[waiting approval] x [waiting-approval] y") == [
        ("thinking", "考える"), ("plan", "手順"), ("waiting_approval", "x"),
        ("waiting_approval", "y")]


def test_a_marked_step_keeps_its_blank_lines_and_is_not_reclassified() -> None:
    # the marker wins over the error words and over a plan-like list inside it
    assert phases("[thinking] the last call failed\n\nso:\n1. retry") == [
        ("thinking", "the last call failed\n\nso:\n1. retry")]


def test_text_before_the_first_marker_goes_through_the_line_rules() -> None:
    assert phases("The lookup failed.\n[計画] 1. retry") == [
        ("error", "The lookup failed."), ("plan", "1. retry")]


def test_an_empty_marker_makes_no_step() -> None:
    assert phases("[思考]   [計画] 1. a") == [("plan", "1. a")]


# -- plan after a plan word ---------------------------------------------------


def test_a_numbered_list_after_plan_is_one_plan_step_with_its_lead_in() -> None:
    text = "The user wants two things.\nPlan:\n1. check credits\n2. check inbox\n\nThen answer."
    assert phases(text) == [
        ("thinking", "The user wants two things."),
        ("plan", "Plan:\n1. check credits\n2. check inbox"),
        ("thinking", "Then answer.")]


def test_a_bulleted_list_after_steps_is_a_plan_across_blank_lines_and_continuations() -> None:
    text = "Steps:\n\n- read the file\n  carefully\n\n* summarise it\nDone thinking."
    assert phases(text) == [
        ("plan", "Steps:\n- read the file\n  carefully\n* summarise it"),
        ("thinking", "Done thinking.")]


def test_a_japanese_list_after_tejun_is_a_plan() -> None:
    text = "手順：\n１．残高を確認\n２）受信箱を確認\n・返事を書く\n以上。"
    assert phases(text) == [
        ("plan", "手順：\n１．残高を確認\n２）受信箱を確認\n・返事を書く"), ("thinking", "以上。")]


def test_a_plan_on_one_line_with_its_items_inline() -> None:
    assert phases("My plan: 1. call check_credits 2. call check_inbox") == [
        ("plan", "My plan: 1. call check_credits 2. call check_inbox")]
    assert phases("計画：1．残高 2．受信箱") == [("plan", "計画：1．残高 2．受信箱")]


def test_a_list_without_a_plan_word_is_thinking() -> None:
    assert phases("Options:\n1. a\n2. b") == [("thinking", "Options:\n1. a\n2. b")]


def test_a_plan_word_without_a_list_is_thinking() -> None:
    assert phases("I plan to spend 1.5 hours on it.") == [
        ("thinking", "I plan to spend 1.5 hours on it.")]


def test_a_plan_item_mentioning_an_error_stays_in_the_plan() -> None:
    assert phases("Plan:\n1. call it\n2. report the error if it failed") == [
        ("plan", "Plan:\n1. call it\n2. report the error if it failed")]


# -- error lines --------------------------------------------------------------


def test_lines_saying_error_or_failed_are_error_steps() -> None:
    text = "Let me look.\nThe call failed.\nAn Error came back.\nI will try again."
    assert phases(text) == [
        ("thinking", "Let me look."), ("error", "The call failed.\nAn Error came back."),
        ("thinking", "I will try again.")]


def test_lines_saying_error_or_failure_in_japanese_are_error_steps() -> None:
    assert phases("確認する。\nエラーが返った。\n送信に失敗した。\n別の方法を試す。") == [
        ("thinking", "確認する。"), ("error", "エラーが返った。\n送信に失敗した。"),
        ("thinking", "別の方法を試す。")]


def test_error_as_part_of_another_word_is_not_an_error() -> None:
    assert phases("terrorism and failedness") == [("thinking", "terrorism and failedness")]


# -- the rest -----------------------------------------------------------------


def test_paragraphs_of_thinking_are_separate_steps() -> None:
    assert parse_steps("First thought.\nStill first.\n\nSecond thought.") == [
        ParsedStep(0, "thinking", "First thought.\nStill first."),
        ParsedStep(1, "thinking", "Second thought.")]


def test_blank_text_has_no_steps() -> None:
    assert parse_steps("") == [] and parse_steps(" \n\t\n") == []


def test_windows_line_endings_are_lines() -> None:
    assert phases("ok\r\nit failed\r\n") == [("thinking", "ok"), ("error", "it failed")]


def test_a_long_text_is_parsed_in_linear_time() -> None:
    text = ("plan " * 20_000 + "\n") + ("[" + " " * 10_000) + ("x\n\n" * 20_000)
    started = time.process_time()  # this process's CPU: other processes' load does not count
    steps = parse_steps(text)
    assert time.process_time() - started < 2.0
    assert [s.step_number for s in steps] == list(range(len(steps)))


# -- properties ---------------------------------------------------------------

_pieces = st.sampled_from([
    "[思考]", "[計画]", "[承認待ち]", "[実行]", "[エラー]", "[thinking]", "[plan]", "[error]",
    "【実行】", "Plan:", "手順", "steps", "1. ", "２．", "- ", "・", "error", "失敗", "\n",
    "\n\n", "  ", "\r", "[", "]", "text", "テキスト"])
_texts = st.one_of(st.text(), st.lists(st.one_of(_pieces, st.text(max_size=5))).map("".join))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_texts)
def test_any_text_gives_gapless_steps_with_known_phases_and_content(text: str) -> None:
    steps = parse_steps(text)
    assert [s.step_number for s in steps] == list(range(len(steps)))
    assert all(s.phase in REASONING_PHASES for s in steps)
    assert all(s.content and s.content == s.content.strip() for s in steps)
    assert parse_steps(text) == steps  # deterministic


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_pieces.filter(lambda p: not p.startswith(("[", "【"))),
                          st.text(alphabet=st.characters(blacklist_characters="[【"),
                                  max_size=8))).map("".join))
def test_without_markers_no_text_is_lost(text: str) -> None:
    def visible(s: str) -> str:
        return "".join(ch for ch in s if not ch.isspace())

    assert visible("".join(s.content for s in parse_steps(text))) == visible(text)
