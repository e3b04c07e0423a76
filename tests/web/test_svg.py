"""Charts drawn as SVG on the server: labels escaped, bars to scale."""

from __future__ import annotations

import re

from overt.web import svg


def test_a_label_holding_markup_is_escaped_in_every_chart() -> None:
    evil = '<script>alert(1)</script>"'
    for markup in (svg.bars([(evil, 1.0)], title=evil), svg.columns([(evil, 1.0)], title=evil),
                   svg.graph([("a", evil, "/memory/a")], [], title=evil)):
        assert "<script>" not in markup and "&lt;script&gt;" in markup


def test_the_largest_bar_spans_the_chart_and_the_others_are_in_proportion() -> None:
    drawn = svg.bars([("a", 10.0), ("b", 5.0), ("c", 0.0)], title="t")
    widths = [float(w) for w in re.findall(r'<rect x="\d+" y="\d+" width="([\d.]+)"', drawn)]
    assert widths[0] == svg.WIDTH - svg.LABEL_W - svg.VALUE_W
    assert widths[1] == widths[0] / 2 and widths[2] == 0.0


def test_a_chart_of_nothing_says_so() -> None:
    assert "nothing recorded" in svg.bars([], title="t")


def test_a_graph_label_wraps_between_words_and_a_longer_one_is_listed_whole() -> None:
    assert svg.wrap("Use SQLite by default for the ledger") == [
        "Use SQLite by default", "for the ledger"]
    assert svg.wrap("x" * 30) == ["x" * 22, "x" * 8]
    long = " ".join(["word"] * 40)
    lines = svg.wrap(long)
    assert len(lines) == svg.LABEL_LINES and lines[-1].endswith("…")
    drawn = svg.graph([("a", long, "/memory/a"), ("b", "short", "/memory/b")],
                      [("a", "b", "depends_on")], title="t")
    assert f"<title>{long}</title>" in drawn
    assert 'class="graph-legend"' in drawn and f">{long}</a></li>" in drawn
    assert drawn.count("<li>") == 1  # the short label is whole in the picture
    assert '>depends_on</text>' in drawn
