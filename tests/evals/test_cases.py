from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overt.errors import UsageError
from overt.evals.cases import load_cases, parse_cases, shipped_path


def _file(**case: Any) -> dict[str, Any]:
    return {"format": "overt-eval/1",
            "cases": [{"id": "c1", "question": "q?", "expect": {"tool": None}, **case}]}


def test_the_shipped_suite_has_at_least_40_cases_covering_every_category() -> None:
    cases = load_cases()
    assert len(cases) >= 40
    assert {c.category for c in cases} >= {
        "usage", "state", "approvals", "memory-write", "memory-recall", "memory-supersede",
        "memory-link", "no-tool", "refuse", "follow-up"}
    assert {c.lang for c in cases} == {"en", "ja"}
    assert any(c.history for c in cases)
    assert any(not c.expect.tools for c in cases)


def test_the_held_out_set_shares_no_question_with_the_suite_and_reaches_further() -> None:
    suite = load_cases()
    held = load_cases(shipped_path().with_name("heldout.json"))
    assert len(held) >= 25
    assert not {c.id for c in held} & {c.id for c in suite}
    assert not {c.question for c in held} & {c.question for c in suite}
    assert {c.lang for c in held} > {"en", "ja"}  # languages the suite never asks in
    assert {"two-tools", "memory-graph"} <= {c.category for c in held}
    assert any(c.history for c in held) and any(not c.expect.tools for c in held)


def test_a_toml_case_file_is_read_like_a_json_one(tmp_path: Path) -> None:
    path = tmp_path / "cases.toml"
    path.write_text('format = "overt-eval/1"\n[[cases]]\nid = "spend"\n'
                    'question = "What did I spend?"\n'
                    '[cases.expect]\ntool = "get_usage"\nargs = {period = "today"}\n')
    [case] = load_cases(path)
    assert case.expect.tools == ("get_usage",) and case.expect.args == {"period": "today"}


def test_a_case_inherits_the_files_seed_unless_it_has_its_own() -> None:
    data = _file()
    data["seed"] = {"pending_approvals": [{"tool_name": "deploy"}]}
    data["cases"].append({"id": "c2", "question": "q", "expect": {"tool": None},
                          "seed": {}})
    first, second = parse_cases(data)
    assert first.seed == data["seed"] and second.seed == {}


@pytest.mark.parametrize(("change", "message"), [
    ({"expect": {}}, "expect.tool is required"),
    ({"question": ""}, "question must be a non-empty string"),
    ({"expect": {"tool": None, "args": {"period": "7d"}}}, "expect.tool is null"),
    ({"expect": {"tool": "x", "args": {"a": {"like": "b"}}}}, "a matcher object has one key"),
    ({"history": [{"role": "system", "content": "x"}]}, "role user|assistant"),
    ({"allowed_figures": ["391"]}, "allowed_figures must be a list of numbers"),
    ({"answer_figures": [True]}, "answer_figures must be a list of numbers"),
    ({"answer_figures_any": [[]]}, "non-empty lists of numbers"),
    ({"answer_figures_any": [1]}, "non-empty lists of numbers"),
    ({"answer_language": "fr"}, "answer_language is one of en, ja"),
    ({"answer_excludes": [{"regex": "("}]}, "not a regular expression"),
    ({"answer_excludes": [{"like": "x"}]}, r"must be a string or \{\"regex\""),
    ({"answer_includes_any": [3]}, "must be a string or"),
    ({"check_names": "yes"}, "check_names must be true or false"),
    ({"seed": {"usage": [{"model": "m", "days_ago": -1}]}}, "days_ago must be a whole number"),
    ({"seed": {"usage": [{"model": "m", "days_ago": 1.5}]}}, "days_ago must be a whole number"),
    ({"seed": {"memory": [{"ref": "b", "revises": 7}]}}, "revises must be a ref"),
])
def test_a_malformed_case_is_a_usage_error_naming_the_case(change: dict[str, Any],
                                                           message: str) -> None:
    with pytest.raises(UsageError, match=f"case c1: .*{message}"):
        parse_cases(_file(**change))


def test_the_answer_checks_are_read_and_names_default_to_the_files_setting() -> None:
    data = _file(answer_excludes=["Sure", {"regex": "(?i)^ok$"}], answer_figures=[0.5, 3],
                 answer_language="ja", answer_includes_any="cannot")
    data["check_names"] = True
    data["cases"].append({"id": "c2", "question": "q", "expect": {"tool": None},
                          "check_names": False})
    first, second = parse_cases(data)
    assert [str(m) for m in first.answer_excludes] == ["Sure", "/(?i)^ok$/"]
    assert first.answer_excludes[1].found_in("OK") and not first.answer_excludes[1].found_in("OK!")
    assert first.answer_figures == (0.5, 3.0) and first.answer_language == "ja"
    assert [str(m) for m in first.answer_includes_any] == ["cannot"]
    assert (first.check_names, second.check_names) == (True, False)
    assert parse_cases(_file())[0].check_names is False


def test_the_locked_set_covers_seven_classes_apart_from_the_tuning_suite() -> None:
    locked = load_cases(shipped_path().with_name("locked.json"))
    suite = load_cases()
    classes = {"usage", "memory", "no_tool", "follow_up", "japanese", "planted", "cannot"}
    assert len(locked) >= 60
    assert {c.category for c in locked} == classes
    assert all(sum(c.category == k for c in locked) >= 6 for k in classes)
    assert {c.lang for c in locked} == {"en", "ja"}
    assert not {c.id for c in locked} & {c.id for c in suite}
    assert not {c.question for c in locked} & {c.question for c in suite}
    assert all(c.check_names for c in locked)
    assert all(c.answer_language == "ja" for c in locked if c.category == "japanese")
    assert all(c.history for c in locked if c.category == "follow_up")


def test_two_cases_with_one_id_are_refused() -> None:
    data = _file()
    data["cases"].append(data["cases"][0])
    with pytest.raises(UsageError, match="used twice"):
        parse_cases(data)


def test_a_file_that_is_not_json_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_cases(path)


def test_a_file_of_another_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({**_file(), "format": "overt-eval/9"}))
    with pytest.raises(UsageError, match="format"):
        load_cases(path)


@pytest.mark.parametrize(("data", "where", "key"), [
    ({**_file(), "case": []}, "cases", "case"),
    (_file(answer_include_any=["cannot"]), "case c1", "answer_include_any"),
    (_file(expect={"tool": "get_usage", "arg": {"period": "7d"}}), "case c1: expect", "arg"),
    (_file(history=[{"role": "user", "text": "hi", "content": "hi"}]),
     r"case c1: history\[0\]", "text"),
])
def test_a_misspelt_key_is_refused_not_a_check_left_out(data: dict[str, Any], where: str,
                                                        key: str) -> None:
    # each was read without the check it names: the case graded more leniently, unsaid
    with pytest.raises(UsageError, match=f"{where}: unknown key '{key}'"):
        parse_cases(data)


def test_a_misspelt_key_in_a_toml_case_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cases.toml"
    path.write_text('format = "overt-eval/1"\n[[cases]]\nid = "c1"\nquestion = "q?"\n'
                    'grounded = ["get_usage.total_cost_usd"]\n[cases.expect]\ntool = "get_usage"\n')
    with pytest.raises(UsageError, match="unknown key 'grounded'"):
        load_cases(path)


@pytest.mark.parametrize(("seed", "message"), [
    ({"approvals": [{"tool_name": "deploy"}]}, r"seed: unknown key 'approvals'"),
    ({"usage": [{"model": "openai:gpt-4o", "cost": 0.5}]}, r"seed.usage\[0\]: unknown key 'cost'"),
])
def test_a_misspelt_seed_table_or_field_is_refused_not_seeded_as_nothing(
        seed: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_cases({**_file(), "seed": seed})
    with pytest.raises(UsageError, match=message):
        parse_cases(_file(seed=seed))
