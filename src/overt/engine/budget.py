"""Budgets: spending limits checked before every model call, and shown to the model.

Before each model call the engine asks :meth:`BudgetGuard.check` whether the
call could stay within every configured limit (tokens and dollars, per session
and per UTC day). What was spent comes from the ledger (every inference already
committed, this turn's included); what the call will spend is estimated from
the request: its text at about four characters a token, plus its output cap.
A call that would cross a limit is not made, and the turn says so plainly.
"""

from __future__ import annotations

from dataclasses import dataclass

from overt.clock import period_start
from overt.errors import ConfigError
from overt.ledger.base import Ledger
from overt.models.pricing import PriceTable
from overt.types import ModelRequest

DEFAULT_OUTPUT_ESTIMATE = 1024


@dataclass(frozen=True, slots=True)
class Budget:
    """Spending limits, each optional: tokens (input + output) and US dollars,
    per session and per UTC day. Checked before every model call."""

    session_tokens: int | None = None
    day_tokens: int | None = None
    session_usd: float | None = None
    day_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("session_tokens", "day_tokens", "session_usd", "day_usd"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 0):
                raise ConfigError(f"budget {name} must be a non-negative number, got {value!r}")

    @property
    def empty(self) -> bool:
        return all(getattr(self, n) is None for n in
                   ("session_tokens", "day_tokens", "session_usd", "day_usd"))


@dataclass(frozen=True, slots=True)
class Spend:
    session_tokens: int
    session_usd: float
    day_tokens: int
    day_usd: float


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a model call was not made: which limit, and by how much."""

    limit: str
    text: str


def estimate_tokens(request: ModelRequest) -> tuple[int, int]:
    """(input, output) tokens a request may use: text at ~4 characters a token."""
    chars = sum(len(m.content) for m in request.messages)
    chars += sum(len(t.description) + len(str(t.input_schema)) for t in request.tools)
    return chars // 4 + 1, request.max_output_tokens or DEFAULT_OUTPUT_ESTIMATE


class BudgetGuard:
    """Checks one runtime's budget against the ledger."""

    def __init__(self, budget: Budget, ledger: Ledger, prices: PriceTable) -> None:
        self.budget = budget
        self.ledger = ledger
        self.prices = prices

    async def spend(self, session_id: str) -> Spend:
        today = period_start("today") or ""
        session_tokens, session_usd = await self.ledger.spent(since="", session_id=session_id)
        day_tokens, day_usd = await self.ledger.spent(since=today)
        return Spend(session_tokens, session_usd, day_tokens, day_usd)

    async def check(self, session_id: str, request: ModelRequest,
                    model: str) -> Refusal | None:
        """``None`` if the call fits every limit, else the first limit it would cross."""
        spend = await self.spend(session_id)
        tokens_in, tokens_out = estimate_tokens(request)
        tokens = tokens_in + tokens_out
        usd = self.prices.price(model).cost(tokens_in, tokens_out)
        b = self.budget
        for limit, cap, used, need, unit in (
            ("session_tokens", b.session_tokens, spend.session_tokens, tokens, "tokens"),
            ("day_tokens", b.day_tokens, spend.day_tokens, tokens, "tokens"),
            ("session_usd", b.session_usd, spend.session_usd, usd, "usd"),
            ("day_usd", b.day_usd, spend.day_usd, usd, "usd"),
        ):
            if cap is not None and used + need > cap:
                scope = "this session's" if limit.startswith("session") else "today's"
                kind = "token" if unit == "tokens" else "dollar"
                return Refusal(limit, (
                    f"I stopped before calling the model: the call would go over {scope} "
                    f"{kind} budget ({_amount(used, unit)} of {_amount(cap, unit)} used, and "
                    f"this call needs about {_amount(need, unit)}). Nothing more was run."))
        return None

    async def describe(self, session_id: str) -> str:
        """The budget as the model reads it at the start of a turn."""
        spend = await self.spend(session_id)
        b = self.budget
        lines = []
        for label, cap, used, unit in (
            ("this session, tokens", b.session_tokens, spend.session_tokens, "tokens"),
            ("today, tokens", b.day_tokens, spend.day_tokens, "tokens"),
            ("this session, dollars", b.session_usd, spend.session_usd, "usd"),
            ("today, dollars", b.day_usd, spend.day_usd, "usd"),
        ):
            if cap is not None:
                lines.append(f"- {label}: {_amount(used, unit)} used of {_amount(cap, unit)}")
        return ("## Budget\n\nSpending limits; a call that would go over one is not made. "
                "Be economical with tool calls when little is left.\n" + "\n".join(lines))


def _amount(value: float, unit: str) -> str:
    return f"{int(value):,}" if unit == "tokens" else f"${value:,.4f}"
