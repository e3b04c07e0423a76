"""Bodies made readable on the server: Markdown rendered, JSON folded and
highlighted, long values collapsed with their size shown.

Everything here returns :class:`~markupsafe.Markup` built from escaped text:

- Markdown goes through markdown-it-py with raw HTML off (``<script>`` in an
  answer is shown as text), images off (a remote image would be a request the
  reader's browser makes for the model; the CSP blocks it anyway, so it shows as
  its link instead), and markdown-it's own link check (no ``javascript:``).
- JSON is parsed with the depth limit of :mod:`overt.json_input` and drawn as
  nested ``<details>`` (folded past the second level), each key, string, number
  and literal in a span the stylesheet colours: no script, nothing inline.
- A string longer than :data:`FOLD` characters is folded, its size in the summary.

A memory node id in a memory tool's result (``id``, ``node_id`` … of the
``node_*``/``link_*`` tools) becomes a link to the node's page.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from markupsafe import Markup

from overt.errors import ExtraMissingError
from overt.json_input import loads

try:
    from markdown_it import MarkdownIt
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ExtraMissingError("server", "markdown-it-py") from exc

FOLD = 1200
"""Characters of a string value shown before it is folded behind its size."""
OPEN_DEPTH = 2
"""Levels of a JSON value shown open; deeper ones are folded."""
NODE_KEYS = frozenset({"id", "node_id", "current_id", "requested_id", "root_id", "from_id",
                       "to_id"})
NODE_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
"""A ULID, as memory node ids are."""


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


_MARKUP = re.compile("['\"*_`\\[\\]<>&!\\\\|\\n\\r\\t]|^(?:[-+#>=]|\\d+[.)])")
"""Anything that can make one line of text more than a paragraph of itself."""


def markdown(text: str) -> Markup:
    """``text`` rendered from Markdown, raw HTML escaped. A line with no character
    Markdown reads (most short answers) is its paragraph as markdown-it writes it,
    without the parse: a session page renders a thousand answers."""
    if text and text == text.strip() and not _MARKUP.search(text):
        return Markup("<p>{}</p>\n").format(text)
    return Markup(_parser().render(text))


def size(n: int) -> str:
    return f"{n:,} chars" if n < 10_000 else f"{n / 1000:,.0f}k chars"


def plain(text: str) -> Markup:
    """Text as preformatted, folded behind its size when long."""
    if len(text) <= FOLD:
        return Markup('<pre class="plain">{}</pre>').format(text)
    return Markup('<details class="long"><summary><span class="clip">{}…</span> '
                  '<span class="size">{}</span></summary><pre class="plain">{}</pre>'
                  "</details>").format(text[:160], size(len(text)), text)


def body(text: str | None, *, links: bool = False) -> Markup:
    """A tool's arguments or result: JSON folded when it is JSON, else plain text.
    ``links``: memory node ids become links (a memory tool's result)."""
    if text is None:
        return Markup('<p class="muted">–</p>')
    try:
        value = loads(text, what="the body")
    except ValueError:
        return plain(text)
    if not isinstance(value, dict | list):
        return plain(text)
    return Markup('<div class="json">{}</div>').format(_value(value, None, 0, links))


def _value(v: Any, key: str | None, depth: int, links: bool) -> Markup:
    if isinstance(v, dict):
        if not v:
            return Markup('<span class="j-p">{}</span>')
        items = Markup("").join(
            Markup('<li><span class="j-k">{}</span>: {}</li>').format(
                json.dumps(k, ensure_ascii=False), _value(x, k, depth + 1, links))
            for k, x in v.items())
        return _fold("{", "}", f"{len(v)} key{'s' if len(v) != 1 else ''}", items, depth)
    if isinstance(v, list):
        if not v:
            return Markup('<span class="j-p">[]</span>')
        items = Markup("").join(Markup("<li>{}</li>").format(_value(x, None, depth + 1, links))
                                for x in v)
        return _fold("[", "]", f"{len(v)} item{'s' if len(v) != 1 else ''}", items, depth)
    if isinstance(v, str):
        shown = json.dumps(v, ensure_ascii=False)
        if links and key in NODE_KEYS and NODE_ID.fullmatch(v):
            return Markup('<a class="j-s" href="/memory/{}">{}</a>').format(v, shown)
        if len(v) > FOLD:
            return Markup('<details class="long"><summary><span class="j-s">{}…</span> '
                          '<span class="size">{}</span></summary><pre class="plain">{}</pre>'
                          "</details>").format(shown[:160], size(len(v)), v)
        return Markup('<span class="j-s">{}</span>').format(shown)
    if isinstance(v, bool) or v is None:
        return Markup('<span class="j-l">{}</span>').format(json.dumps(v))
    return Markup('<span class="j-n">{}</span>').format(json.dumps(v))


def _fold(left: str, right: str, count: str, items: Markup, depth: int) -> Markup:
    opened = " open" if depth < OPEN_DEPTH else ""
    return Markup('<details class="j"{}><summary><span class="j-p">{}</span>'
                  '<span class="j-c">{}</span></summary><ul>{}</ul><span class="j-p">{}</span>'
                  "</details>").format(Markup(opened), left, count, items, right)


