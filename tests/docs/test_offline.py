"""The site works offline: no web fonts, and nothing that makes Material for MkDocs
fetch a script at view time (it loads Mermaid from a CDN for a ``mermaid`` block)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_theme_loads_no_web_fonts() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "\n  font: false" in config


def test_no_page_draws_a_mermaid_diagram() -> None:
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    assert not [p for p in pages if "```mermaid" in p.read_text()]
