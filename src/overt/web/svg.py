"""Charts drawn on the server as inline SVG: no script, no chart library.

Each function returns markup in which every label is escaped here; the result
is the one thing templates print unescaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from markupsafe import Markup

BAR_H, GAP, LABEL_W, VALUE_W, WIDTH = 18, 6, 170, 90, 640


def bars(items: Sequence[tuple[str, float]], *, title: str,
         fmt: Callable[[float], str] = lambda v: f"{v:,.0f}") -> Markup:
    """A horizontal bar chart of ``items`` (label, value), titled for screen readers."""
    top = max((v for _, v in items), default=0.0) or 1.0
    span = WIDTH - LABEL_W - VALUE_W
    height = max(len(items), 1) * (BAR_H + GAP) + GAP
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" aria-label="{escape(title)}">',
             f"<title>{escape(title)}</title>"]
    for i, (name, value) in enumerate(items):
        y = GAP + i * (BAR_H + GAP)
        w = max(value / top * span, 1.0 if value > 0 else 0.0)
        parts.append(
            f'<text x="{LABEL_W - 8}" y="{y + BAR_H - 5}" text-anchor="end" '
            f'class="lbl">{escape(_cut(name))}</text>'
            f'<rect x="{LABEL_W}" y="{y}" width="{w:.1f}" height="{BAR_H}" class="bar">'
            f"<title>{escape(name)}: {escape(fmt(value))}</title></rect>"
            f'<text x="{LABEL_W + w + 6:.1f}" y="{y + BAR_H - 5}" class="val">'
            f"{escape(fmt(value))}</text>")
    if not items:
        parts.append(f'<text x="{GAP}" y="{BAR_H}" class="lbl">nothing recorded</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def columns(items: Sequence[tuple[str, float]], *, title: str,
            fmt: Callable[[float], str] = lambda v: f"{v:,.0f}") -> Markup:
    """A column chart over time (label under each column), for days."""
    height, base, top_pad = 180, 150, 18
    top = max((v for _, v in items), default=0.0) or 1.0
    n = max(len(items), 1)
    step = (WIDTH - 20) / n
    w = max(min(step - 4, 40), 2)
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" aria-label="{escape(title)}">',
             f"<title>{escape(title)}</title>",
             f'<line x1="10" y1="{base}" x2="{WIDTH - 10}" y2="{base}" class="axis"/>']
    for i, (name, value) in enumerate(items):
        x = 10 + i * step + (step - w) / 2
        h = value / top * (base - top_pad)
        parts.append(
            f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{w:.1f}" height="{h:.1f}" '
            f'class="bar"><title>{escape(name)}: {escape(fmt(value))}</title></rect>')
        if n <= 16 or i % max(n // 8, 1) == 0:
            parts.append(f'<text x="{x + w / 2:.1f}" y="{base + 14}" text-anchor="middle" '
                         f'class="lbl">{escape(name[5:10] if len(name) >= 10 else name)}'
                         "</text>")
    parts.append("</svg>")
    return Markup("".join(parts))


def graph(nodes: Sequence[tuple[str, str, str]], links: Sequence[tuple[str, str, str]],
          *, title: str, size: int = 420, center: str | None = None) -> Markup:
    """A small graph: ``nodes`` (id, label, href) on a circle (``center`` in its
    middle), ``links`` (from, to, kind) as lines between them."""
    import math
    c, r = size / 2, size / 2 - 70
    at: dict[str, tuple[float, float]] = {}
    ring = [n for n in nodes if n[0] != center]
    if center is not None and len(ring) < len(nodes):
        at[center] = (c, c)
    for i, (node_id, _, _) in enumerate(ring):
        angle = 2 * math.pi * i / max(len(ring), 1) - math.pi / 2
        at[node_id] = (c + r * math.cos(angle), c + r * math.sin(angle))
    parts = [f'<svg class="graph" role="group" viewBox="0 0 {size} {size}" width="{size}" '
             f'height="{size}" aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for a, b, kind in links:
        if a in at and b in at:
            (x1, y1), (x2, y2) = at[a], at[b]
            parts.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" '
                         f'class="edge"><title>{escape(kind)}</title></line>')
    for node_id, name, href in nodes:
        x, y = at[node_id]
        parts.append(f'<a href="{escape(href)}"><circle cx="{x:.0f}" cy="{y:.0f}" r="7" '
                     f'class="node"/><text x="{x:.0f}" y="{y - 11:.0f}" text-anchor="middle" '
                     f'class="lbl">{escape(_cut(name, 22))}</text></a>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _cut(text: str, width: int = 24) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
