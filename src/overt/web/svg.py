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
    middle), ``links`` (from, to, kind) as lines between them, each labelled with
    its kind at its middle.

    A node's label wraps over up to :data:`LABEL_LINES` lines; its full text is
    its ``<title>`` (a tooltip, and what a screen reader reads), and a label too
    long to wrap whole is also listed in full in a legend under the picture."""
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
    edge_labels = []
    for a, b, kind in links:
        if a in at and b in at:
            (x1, y1), (x2, y2) = at[a], at[b]
            parts.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" '
                         f'class="edge"><title>{escape(kind)}</title></line>')
            edge_labels.append(f'<text x="{(x1 + x2) / 2:.0f}" y="{(y1 + y2) / 2 + 4:.0f}" '
                               f'text-anchor="middle" class="elbl">{escape(kind)}</text>')
    parts.extend(edge_labels)  # over every line, so no line crosses a label
    legend = []
    for node_id, name, href in nodes:
        x, y = at[node_id]
        lines = wrap(name)
        if len(wrap(name, lines=len(name) + 1)) > LABEL_LINES:
            legend.append(f'<li><a href="{escape(href)}">{escape(name)}</a></li>')
        # above a node in the ring's upper half, below one in its lower half and the
        # centre's (its edges run out to the ring, their labels at their middles)
        top = (y - 11 - (len(lines) - 1) * LINE_H if y < c - 1 or (y <= c and node_id != center)
               else y + 22)
        spans = "".join(f'<tspan x="{x:.0f}" y="{top + k * LINE_H:.0f}">{escape(t)}</tspan>'
                        for k, t in enumerate(lines))
        parts.append(f'<a href="{escape(href)}"><title>{escape(name)}</title>'
                     f'<circle cx="{x:.0f}" cy="{y:.0f}" r="7" class="node"/>'
                     f'<text text-anchor="middle" class="lbl">{spans}</text></a>')
    parts.append("</svg>")
    if legend:
        parts.append('<ul class="graph-legend" aria-label="full names">' + "".join(legend)
                     + "</ul>")
    return Markup("".join(parts))


LABEL_LINES, WRAP_W, LINE_H = 4, 22, 13


def wrap(text: str, width: int = WRAP_W, lines: int = LABEL_LINES) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words (a
    longer word is split), at most ``lines`` of them: the last ends in ``…`` when
    the text goes on."""
    out: list[str] = []
    line = ""
    for word in text.split():
        while len(word) > width:
            if line:
                out.append(line)
                line = ""
            out.append(word[:width])
            word = word[width:]
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1].rstrip() + "…"
    return out or [""]


def _cut(text: str, width: int = 24) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
