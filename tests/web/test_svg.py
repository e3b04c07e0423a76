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
