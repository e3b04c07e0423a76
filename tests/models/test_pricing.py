from __future__ import annotations

from overt.models.pricing import PriceTable
from overt.types import Usage


def test_a_model_is_priced_by_exact_name_bare_name_then_longest_prefix() -> None:
    table = PriceTable({"acme-large": (10.0, 20.0), "acme-large-2": (1.0, 2.0)})
    assert table.price("acme-large").input_per_mtok == 10.0
    assert table.price("acme:acme-large").input_per_mtok == 10.0
    assert table.price("acme-large-2-20260101").input_per_mtok == 1.0
    assert table.price("anthropic:claude-sonnet-4-20250514").output_per_mtok == 15.0


def test_config_overrides_the_shipped_prices() -> None:
    assert PriceTable({"gpt-4o": (1.0, 1.0)}).price("openai:gpt-4o").input_per_mtok == 1.0


def test_embedded_and_scripted_models_are_free_and_unknown_ones_say_so() -> None:
    table = PriceTable()
    assert table.price("local:qwen2.5-coder-0.5b").known
    assert table.cost("scripted", Usage(10**6, 10**6)) == 0.0
    unknown = table.price("openai:some-model-nobody-priced")
    assert not unknown.known and unknown.cost(10**6, 10**6) == 0.0


def test_cost_is_tokens_times_the_price_per_million() -> None:
    assert PriceTable({"m": (3.0, 15.0)}).cost("m", Usage(2000, 1000)) == 0.021
