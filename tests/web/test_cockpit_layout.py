"""The layout at phone widths: every page fits 360 and 390 px with no sideways
scrolling, and axe-core finds nothing serious on the whole page (navigation included)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import ASSETS, OPERATOR, Cockpit, need_browser

need_browser()

from tests.web.test_cockpit_live import ask, log_in  # noqa: E402

PAGES = ("/live", "/approvals", "/sessions", "/turns", "/usage", "/memory", "/ledger")


def whole_page_violations(page: Any) -> list[dict[str, Any]]:
    page.evaluate((ASSETS / "axe.min.js").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = page.evaluate(
        "async () => (await axe.run(document)).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target)}))")
    return found


def overflow(page: Any) -> tuple[int, int]:
    wide: int = page.evaluate("document.documentElement.scrollWidth")
    inner: int = page.evaluate("window.innerWidth")
    return wide, inner


def pages_of_a_session(cockpit: Cockpit) -> list[str]:
    turn = ask(cockpit.base, "hello from a phone")
    return [f"/turns/{turn['turn_id']}", f"/sessions/{turn['session_id']}"]


@pytest.mark.parametrize("width", (360, 390))
def test_every_page_fits_a_phone_with_no_sideways_scroll_and_nothing_serious_for_axe(
        chromium: Any, cockpit: Cockpit, width: int) -> None:
    login = chromium.new_context(base_url=cockpit.base,
                                 viewport={"width": width, "height": 800}).new_page()
    login.goto("/login")
    assert overflow(login)[0] <= width
    assert whole_page_violations(login) == []
    page = log_in(chromium, cockpit.base, OPERATOR)
    page.set_viewport_size({"width": width, "height": 800})
    for path in (*PAGES, "/no-such-page", *pages_of_a_session(cockpit)):
        page.goto(path)
        wide, inner = overflow(page)
        assert wide <= inner, f"{path} scrolls sideways to {wide} px at {inner} px"
        assert whole_page_violations(page) == [], path
