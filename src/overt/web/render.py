"""Templates: Jinja2 with autoescape on, loaded from the package.

Everything a template prints is escaped unless marked safe, and nothing
recorded is ever marked safe: a message holding ``<script>`` shows as text.
The only markup built in Python is the SVG of :mod:`overt.web.svg`, which
escapes every label itself, and the ``<time>`` element of :func:`clock`, built with
:meth:`Markup.format` (which escapes what it is given).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from markupsafe import Markup

from overt.errors import ExtraMissingError
from overt.reasoning.parse import LABELS

try:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ExtraMissingError("server", "jinja2") from exc

from starlette.requests import Request
from starlette.responses import HTMLResponse

from overt.web.auth import Login
from overt.web.readable import markdown
from overt.web.timeline import call_anchor
from overt.web.viewer import APPROVALS_READ, LEDGER, MEMORY, USAGE, Viewer

NAV: tuple[tuple[str, str, str | None], ...] = (
    ("live", "Live", None), ("approvals", "Approvals", APPROVALS_READ),
    ("sessions", "Sessions", None), ("usage", "Usage", USAGE), ("memory", "Memory", MEMORY),
    ("ledger", "Ledger", LEDGER))
"""The navigation: each page's path, name and the capability without which it
answers 403 (``None``: every logged-in actor may open it)."""

ZONE = "UTC"
"""The zone the cockpit writes times in: the ledger's (every record is in UTC, and
the config names no other zone for the clock or the usage periods)."""


def nav(viewer: Viewer) -> list[tuple[str, str]]:
    """The pages ``viewer`` may open, as (path, name): a link it would be refused
    (403) is not offered."""
    return [(key, name) for key, name, needs in NAV if needs is None or viewer.may(needs)]


def money(value: float | None) -> str:
    """Dollars as the CLI prints them: four decimals under a cent, else two."""
    if value is None:
        return "–"
    return f"${value:,.4f}" if 0 < abs(value) < 0.01 else f"${value:,.2f}"


def duration(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def stamp(at: str | None) -> str:
    """A ledger time as text with its zone: ``YYYY-MM-DD HH:MM:SS UTC`` (for a title,
    an attribute: where no element may go)."""
    return "–" if not at else f"{at[:19].replace('T', ' ')} {ZONE}"


def clock(at: str | None) -> Markup:
    """A ledger time as a ``<time>`` element: the exact record in ``datetime``, shown
    to the second with its zone (``2026-11-29 00:31:07 UTC``)."""
    if not at:
        return Markup("–")
    return Markup('<time datetime="{}">{}</time>').format(at, stamp(at))


def label(phase: str, language: str = "en") -> str:
    return LABELS.get(language, LABELS["en"]).get(phase, phase)  # type: ignore[call-overload, no-any-return]


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=PackageLoader("overt.web", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      auto_reload=False)
    env.filters.update(money=money, duration=duration, clock=clock, stamp=stamp, label=label,
                       markdown=markdown, anchor=call_anchor)
    env.globals["nav"] = nav
    return env


def fragment(template: str, **context: Any) -> str:
    """A template rendered to text (a part of a page, an SSE event's data)."""
    return environment().get_template(template).render(**context)


def page(template: str, viewer: Viewer | None, login: Login | None, *, active: str = "",
         status: int = 200, **context: Any) -> HTMLResponse:
    """A whole page: the layout with its navigation, for ``viewer``."""
    body = fragment(template, viewer=viewer, csrf=login.csrf if login else "",
                    active=active, **context)
    return HTMLResponse(body, status_code=status)


def unknown_query(request: Request, known: tuple[str, ...]) -> str:
    """Why a page refuses its query, or ``""``: a parameter it does not take. A
    mistyped filter (``?sinse=24h``) would otherwise be ignored, and the page show
    everything as if it were the filtered list."""
    unknown = sorted(set(request.query_params) - set(known))
    if not unknown:
        return ""
    takes = ", ".join(known) if known else "no parameters"
    return f"unknown query parameter {', '.join(unknown)}: this page takes {takes}"
