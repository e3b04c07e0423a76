"""What a model call costs: a price table, in US dollars per million tokens.

The shipped defaults are providers' published list prices for a few common
models at the time of writing; they are defaults, not facts about your
contract: override or extend them in config (``[prices]``). A model is
matched by its exact name, then without its ``provider:`` prefix, then by the
longest known prefix (``claude-sonnet-4`` prices ``claude-sonnet-4-20250514``).
Embedded and scripted models cost nothing unless config prices them. An unknown model is priced at 0
and says so (``known`` is false), so a missing price is visible, not guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from overt.types import Usage

# USD per million (input, output) tokens.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
}
FREE_SCHEMES = ("local", "scripted", "function")


@dataclass(frozen=True, slots=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    known: bool = True

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return round((input_tokens * self.input_per_mtok
                      + output_tokens * self.output_per_mtok) / 1_000_000, 10)


UNKNOWN = Price(0.0, 0.0, known=False)
FREE = Price(0.0, 0.0)


class PriceTable:
    """Prices by model name: the shipped defaults with ``overrides`` on top."""

    def __init__(self, overrides: Mapping[str, tuple[float, float]] | None = None) -> None:
        self._prices = {**DEFAULT_PRICES, **(overrides or {})}
        self._by_length = sorted(self._prices, key=len, reverse=True)

    def price(self, model: str) -> Price:
        """The price of ``model`` (see the module docstring for how names match)."""
        scheme, _, bare = model.partition(":")
        for name in (model, bare):
            if name in self._prices:
                return Price(*self._prices[name])
        if scheme in FREE_SCHEMES:
            return FREE
        for name in self._by_length:
            if model.startswith(name) or (bare and bare.startswith(name)):
                return Price(*self._prices[name])
        return UNKNOWN

    def cost(self, model: str, usage: Usage) -> float:
        """Dollars for ``usage`` on ``model`` (0 for an unknown model)."""
        return self.price(model).cost(usage.input_tokens, usage.output_tokens)
