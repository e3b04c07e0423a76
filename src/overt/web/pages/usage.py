"""The Usage page: tokens and dollars per day, per route and model, and the budget.

The figures are ``overt usage``'s: the same :meth:`Ledger.usage` over the same
period (``?since=``, as ``overt usage --since``: ``today``, ``7d``, an ISO
time, ``all``; default ``30d``), drawn as SVG with a table beneath. The
budget's day limits show what is left of today; the session limits are shown
as they are (each session has its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response

from overt.clock import period_start
from overt.engine.budget import Budget
from overt.errors import UsageError
from overt.ledger.base import UsageRow
from overt.runtime import Runtime
from overt.web import svg
from overt.web.auth import Login
from overt.web.render import money, page, unknown_query
from overt.web.viewer import USAGE, Viewer

DEFAULT_SINCE = "30d"
MAX_DAYS = 92


@dataclass(frozen=True, slots=True)
class Left:
    """One budget limit: what it is, what was spent against it, what is left."""

    name: str
    limit: str
    spent: str
    left: str | None


def _every_day(rows: list[UsageRow], start: str | None) -> list[UsageRow]:
    """``rows`` (one per day with inferences) with the days between them at zero, from
    the period's start (or the first day recorded) to today, at most :data:`MAX_DAYS`."""
    if not rows:
        return rows
    first = date.fromisoformat((start or rows[0].day)[:10])
    last = max(date.fromisoformat(rows[-1].day[:10]), datetime.now(UTC).date())
    if (last - first).days >= MAX_DAYS:
        return rows
    have = {r.day: r for r in rows}
    out = []
    for n in range((last - first).days + 1):
        day = (first + timedelta(days=n)).isoformat()
        out.append(have.get(day) or UsageRow("*", "*", 0, 0, 0, 0.0, day=day))
    return out


class UsagePage:
    def __init__(self, runtime: Runtime, budget: Budget | None) -> None:
        self.runtime, self.budget = runtime, budget

    async def page(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(USAGE):
            return page("denied.html", viewer, login, active="usage", status=403,
                        capability=USAGE)
        since = request.query_params.get("since", DEFAULT_SINCE).strip() or DEFAULT_SINCE
        try:
            if problem := unknown_query(request, ("since",)):
                raise UsageError(problem)
            start = period_start(since)
        except UsageError as exc:
            return page("denied.html", viewer, login, active="usage", status=422,
                        capability=None, message=str(exc))
        ledger = self.runtime.ledger
        rows = await ledger.usage(since=start, by=("route", "model"))
        days = _every_day(sorted(await ledger.usage(since=start, by=("day",)),
                                 key=lambda r: r.day), start)
        tokens = sum(r.input_tokens + r.output_tokens for r in rows)
        dollars = sum(r.cost_usd for r in rows)
        charts = {
            "tokens_by_day": svg.columns([(r.day, r.input_tokens + r.output_tokens)
                                          for r in days], title="tokens per day"),
            "dollars_by_day": svg.columns([(r.day, r.cost_usd) for r in days],
                                          title="dollars per day", fmt=money),
            "dollars_by_model": svg.bars([(f"{r.route} · {r.model}", r.cost_usd)
                                          for r in rows], title="dollars per route and model",
                                         fmt=money),
            "tokens_by_model": svg.bars([(f"{r.route} · {r.model}",
                                          r.input_tokens + r.output_tokens) for r in rows],
                                        title="tokens per route and model"),
        }
        return page("usage.html", viewer, login, active="usage", since=since, start=start,
                    rows=rows, days=days, tokens=tokens, dollars=dollars, charts=charts,
                    budget=await self._left())

    async def _left(self) -> list[Left]:
        b = self.budget
        if b is None or b.empty:
            return []
        out = []
        day_tokens, day_usd = await self.runtime.ledger.spent(since=period_start("today")
                                                              or "")
        if b.day_tokens is not None:
            out.append(Left("tokens today", f"{b.day_tokens:,}", f"{day_tokens:,}",
                            f"{max(b.day_tokens - day_tokens, 0):,}"))
        if b.day_usd is not None:
            out.append(Left("dollars today", money(b.day_usd), money(day_usd),
                            money(max(b.day_usd - day_usd, 0.0))))
        if b.session_tokens is not None:
            out.append(Left("tokens per session", f"{b.session_tokens:,}", "per session", None))
        if b.session_usd is not None:
            out.append(Left("dollars per session", money(b.session_usd), "per session", None))
        return out
