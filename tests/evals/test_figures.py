from __future__ import annotations

from decimal import Decimal

import pytest

from overt.evals.figures import answer_figures, grounded, invented, kanji_value, source_figures


def _values(text: str) -> list[str]:
    return [format(v.normalize(), "f") for v in answer_figures(text)]


def test_thousands_separators_and_decimals_are_read_as_one_figure() -> None:
    assert _values("You used 2,313 tokens and spent $0.0123.") == ["2313", "0.0123"]


def test_full_width_digits_are_read_as_ascii_figures() -> None:
    assert _values("承認待ちは２件です。") == ["2"]


@pytest.mark.parametrize(("text", "value"), [
    ("二千三百十三", 2313), ("十二", 12), ("三", 3), ("1万2千", 12000), ("百", 100),
    ("二億", 200_000_000),
])
def test_japanese_numerals_have_their_value(text: str, value: int) -> None:
    assert kanji_value(text) == value


def test_a_japanese_numeral_with_a_counter_is_a_figure_and_a_lone_one_in_a_word_is_not() -> None:
    assert _values("保留中は三件、一部は古い。") == ["3"]


def test_digits_glued_to_letters_are_names_not_figures() -> None:
    assert _values("qwen2.5 answered over 24h for 01J9ZK3 on db-stg-3") == []


def test_a_list_marker_at_the_start_of_a_line_is_not_a_figure() -> None:
    assert _values("1. tokens: 2313\n2) cost: 0.5") == ["2313", "0.5"]


def test_k_and_m_suffixes_scale_the_figure() -> None:
    assert _values("about 2.3k tokens, 1.2M in total") == ["2300", "1200000"]


def test_a_figure_rounded_from_a_source_is_grounded() -> None:
    sources = {Decimal("0.0123"), Decimal("2313")}
    assert grounded(Decimal("0.01"), sources)
    assert grounded(Decimal("2.3") * 1000, sources)
    assert not grounded(Decimal("0.02"), sources)


def test_every_digit_run_of_a_source_counts_even_inside_a_timestamp() -> None:
    assert {Decimal(2026), Decimal(11), Decimal(24)} <= source_figures(
        ['{"since": "2026-11-24T00:00:00Z"}'])


def test_a_figure_found_in_no_source_is_invented() -> None:
    result = '{"total_cost_usd": 0.0123, "inferences": 6}'
    assert invented("You spent $0.0123 over 6 calls; 7 approvals wait.", [result]) == ["7"]


def test_a_figure_the_case_allows_is_not_invented() -> None:
    assert invented("17 × 23 = 391", ["What is 17 times 23?"], [391]) == []
    assert invented("17 × 23 = 401", ["What is 17 times 23?"], [391]) == ["401"]


def test_a_japanese_answer_stating_a_returned_figure_invents_nothing() -> None:
    assert invented("承認待ちは二件です。", ['{"pending_approvals": 2}']) == []
