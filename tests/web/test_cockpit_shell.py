"""The cockpit's shell in Chromium, at 1280 and 390 px: dark mode following the
system setting (axe in both schemes, every page), the navigation offering only what
an actor may open, times with their zone, and Live's controls (filter, pause and
resume, older turns, a running turn's tokens, a failed turn's kind and message)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from overt.engine.budget import Budget
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.models.pricing import PriceTable
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.web import cockpit_routes
from tests.web.conftest import (
    AUDITOR,
    CLIENT,
    CONFIG,
    GRANTS,
    OPERATOR,
    RULE,
    TOKENS,
    Cockpit,
    need_browser,
    uvicorn_server,
)

need_browser()
from playwright.sync_api import expect  # noqa: E402

from overt.channels.http import create_app  # noqa: E402
from tests.web.test_cockpit_layout import overflow, whole_page_violations  # noqa: E402
from tests.web.test_cockpit_live import WAIT_MS, ask  # noqa: E402
from tests.web.test_live_controls import failing  # noqa: E402

WIDTHS = (1280, 390)
NAV = ("live", "approvals", "sessions", "usage", "memory", "ledger")
DARK_BG = "rgb(13, 17, 23)"
LIGHT_BG = "rgb(255, 255, 255)"


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cockpit]:
    """A cockpit whose model fails on a message naming ``boom``."""
    project = tmp_path_factory.mktemp("shell")
    (project / "overt.toml").write_text(CONFIG, encoding="utf-8")
    db = project / "ledger.db"
    runtime = Runtime(model=FunctionModel(failing, name="function"),
                      ledger=open_ledger(str(db)),
                      gate=Gate(Policy([RULE]), Capabilities(GRANTS)),
                      prices=PriceTable({"function": (3.0, 15.0)}))
    app = create_app(runtime, TOKENS, extra_routes=cockpit_routes(
        runtime, TOKENS, budget=Budget(day_tokens=100_000, day_usd=5.0)))
    with uvicorn_server(app) as base:
        yield Cockpit(base, runtime, db, project)


def open_as(browser: Any, base: str, token: str, width: int, scheme: str = "light") -> Any:
    page = browser.new_context(base_url=base, viewport={"width": width, "height": 900},
                               color_scheme=scheme).new_page()
    page.goto("/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Live")).to_be_visible()
    return page


def failed_turn(base: str) -> dict[str, Any]:
    r = httpx.post(f"{base}/v1/messages", json={"text": "boom, fail now"},
                   headers={"Authorization": f"Bearer {CLIENT}"}, timeout=30)
    answer: dict[str, Any] = r.json()
    assert answer.get("turn_id"), r.text
    return answer


def every_page(base: str) -> list[str]:
    done = ask(base, "hello in the dark")
    held = ask(base, "How much usage today?")
    bad = failed_turn(base)
    return ["/live", "/live?paused=1", "/approvals", "/sessions", "/turns",
            "/turns?order=errors", "/usage", "/memory", "/ledger", "/ledger/entries/1",
            f"/turns/{done['turn_id']}", f"/sessions/{done['session_id']}",
            f"/turns/{held['turn_id']}", f"/turns/{bad['turn_id']}",
            "/live?status=nonsense"]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("scheme", ("light", "dark"))
def test_every_page_follows_the_system_scheme_with_nothing_serious_for_axe(
        chromium: Any, shell: Cockpit, scheme: str, width: int) -> None:
    page = open_as(chromium, shell.base, OPERATOR, width, scheme)
    for path in every_page(shell.base):
        page.goto(path)
        background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        assert background == (DARK_BG if scheme == "dark" else LIGHT_BG), path
        wide, inner = overflow(page)
        assert wide <= inner, f"{path} scrolls sideways to {wide} px at {inner} px"
        assert whole_page_violations(page) == [], (scheme, width, path)
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("token", (OPERATOR, AUDITOR, CLIENT))
def test_the_navigation_shows_every_page_the_actor_may_open_and_no_other(
        chromium: Any, shell: Cockpit, token: str, width: int) -> None:
    page = open_as(chromium, shell.base, token, width)
    shown = [href.strip("/") for href in page.locator("header.top nav a").evaluate_all(
        "as => as.map(a => a.getAttribute('href'))")]
    assert shown and set(shown) <= set(NAV)
    for key in NAV:
        response = page.goto(f"/{key}")
        assert response is not None
        assert response.status == (200 if key in shown else 403), (token, key, response.status)
    if token == CLIENT:
        assert "usage" not in shown and "ledger" not in shown
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_time_shown_carries_its_zone_in_a_time_element(
        chromium: Any, shell: Cockpit, width: int) -> None:
    page = open_as(chromium, shell.base, OPERATOR, width)
    answer = ask(shell.base, "what time is it")
    for path in ("/live", "/sessions", "/turns", f"/turns/{answer['turn_id']}",
                 f"/sessions/{answer['session_id']}", "/ledger/entries/1"):
        page.goto(path)
        times = page.locator("main time").evaluate_all(
            "ts => ts.map(t => [t.getAttribute('datetime'), t.textContent])")
        assert times, path
        for at, said in times:
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", at), (path, at)
            assert said == f"{at[:10]} {at[11:19]} UTC", (path, said)
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_live_filters_by_session_and_keeps_to_it_as_turns_arrive(
        chromium: Any, shell: Cockpit, width: int) -> None:
    page = open_as(chromium, shell.base, OPERATOR, width)
    first = ask(shell.base, "the first of a session")
    page.get_by_label("Session").fill(first["session_id"])
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"/live\?session="))
    expect(page.locator(f"#turn-{first['turn_id']}")).to_be_visible()
    page.wait_for_timeout(300)  # the stream has connected
    other = ask(shell.base, "another session's turn")
    same = ask(shell.base, "the second of the session", session_id=first["session_id"])
    expect(page.locator(f"#turn-{same['turn_id']}")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator(f"#turn-{other['turn_id']}")).to_have_count(0)
    expect(page.get_by_label("Session")).to_have_value(first["session_id"])
    page.goto("/live?status=bad")
    bad = failed_turn(shell.base)
    turn = page.locator(f"#turn-{bad['turn_id']}")
    expect(turn).to_be_visible(timeout=WAIT_MS)
    expect(turn.locator("p.err")).to_contain_text("model error (ModelError)")
    expect(turn.locator("p.err")).to_contain_text("the upstream model answered 529")
    expect(page.locator("#turns article.status-completed")).to_have_count(0)
    page.goto("/live?status=nonsense&sesion=x")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("unknown query parameter sesion")
    expect(alert).to_contain_text("status: 'nonsense' is not one of")
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_live_pauses_and_resumes(chromium: Any, shell: Cockpit, width: int) -> None:
    page = open_as(chromium, shell.base, OPERATOR, width)
    page.get_by_role("link", name="Pause").click()
    expect(page.get_by_role("status")).to_contain_text("paused")
    missed = ask(shell.base, "asked while paused")
    page.wait_for_timeout(1500)
    expect(page.locator(f"#turn-{missed['turn_id']}")).to_have_count(0)
    page.get_by_role("link", name="Resume").click()
    expect(page.locator(f"#turn-{missed['turn_id']}")).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_role("status")).to_contain_text("live")
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_live_shows_older_turns_a_page_at_a_time(chromium: Any, shell: Cockpit,
                                                width: int, shots: Any) -> None:
    asked = [ask(shell.base, f"older question {i}")["turn_id"] for i in range(42)]
    page = open_as(chromium, shell.base, OPERATOR, width)
    expect(page.locator(f"#turn-{asked[-1]}")).to_be_visible()
    expect(page.locator("#turns article")).to_have_count(40)
    expect(page.locator(f"#turn-{asked[0]}")).to_have_count(0)
    page.get_by_role("link", name="Older turns").click()
    expect(page).to_have_url(re.compile(r"/live\?before=\d+$"))
    expect(page.locator(f"#turn-{asked[0]}")).to_be_visible()
    expect(page.locator(f"#turn-{asked[1]}")).to_be_visible()
    expect(page.locator(f"#turn-{asked[-1]}")).to_have_count(0)
    expect(page.get_by_role("status")).to_contain_text("older turns")
    assert whole_page_violations(page) == []
    page.get_by_role("link", name="Newest turns, live").click()
    expect(page.locator(f"#turn-{asked[-1]}")).to_be_visible()
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_held_turn_on_live_shows_its_tokens_so_far(chromium: Any, shell: Cockpit,
                                                     width: int) -> None:
    page = open_as(chromium, shell.base, OPERATOR, width)
    held = ask(shell.base, "How much usage now?")
    turn = page.locator(f"#turn-{held['turn_id']}")
    expect(turn).to_have_attribute("data-status", "awaiting_approval", timeout=WAIT_MS)
    expect(turn).to_contain_text("so far (1 model call)")
    expect(turn).not_to_contain_text("0 in / 0 out")
    page.context.close()


def test_screenshots_for_the_docs(chromium: Any, shell: Cockpit, tmp_path: Path) -> None:
    """The phone layout (a session page at 390 px) and dark mode (Live at 1280 px),
    written to ``$OVERT_DOCS_SHOTS`` when set (the docs' PNGs are made so)."""
    import os
    folder = Path(os.environ.get("OVERT_DOCS_SHOTS") or tmp_path)
    answer = ask(shell.base, "Summarise **today** in one line, please")
    ask(shell.base, "And how much usage today?", session_id=answer["session_id"])
    phone = open_as(chromium, shell.base, OPERATOR, 390)
    phone.goto(f"/sessions/{answer['session_id']}")
    phone.screenshot(path=str(folder / "cockpit-phone.png"), full_page=False)
    dark = open_as(chromium, shell.base, OPERATOR, 1280, "dark")
    failed_turn(shell.base)
    dark.goto("/live")
    dark.screenshot(path=str(folder / "cockpit-dark.png"), full_page=False)
    assert (folder / "cockpit-phone.png").stat().st_size > 0
    phone.context.close()
    dark.context.close()
