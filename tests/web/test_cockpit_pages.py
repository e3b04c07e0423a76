"""Sessions, Usage, Memory and Ledger pages in a real browser; escaping; accessibility."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from overt.channels.http import create_app
from overt.ledger import open_ledger
from overt.memory.store import Writer, store_for
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from overt.web import cockpit_routes
from overt.web.pages.ledger import VerifyJob
from tests.ledger.proofs_helpers import add_turns, make_signer
from tests.web.conftest import (
    ASSETS,
    AUDITOR,
    OPERATOR,
    TOKENS,
    Cockpit,
    cli_env,
    need_browser,
    reply,
    uvicorn_server,
)

need_browser()
from playwright.sync_api import expect  # noqa: E402  (after the check: may be missing)

from tests.web.test_cockpit_live import WAIT_MS, ask, log_in  # noqa: E402

XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
PAGES = ("/live", "/approvals", "/sessions", "/usage", "/memory", "/ledger")


def overt(cockpit: Cockpit, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "overt.cli", *args], cwd=cockpit.project,
                          env=cli_env(cockpit.db), capture_output=True, text=True, timeout=120)


def serious_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is now."""
    page.evaluate((ASSETS / "axe.min.js").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = page.evaluate(
        "async () => (await axe.run(document)).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target)}))")
    return found


def test_a_session_reads_as_its_conversation_in_both_label_languages(
        chromium: Any, cockpit: Cockpit, shots: Any) -> None:
    first = ask(cockpit.base, "Plan my week")
    ask(cockpit.base, "usage for this week, please", session_id=first["session_id"])
    page = log_in(chromium, cockpit.base, OPERATOR)
    page.goto(f"/sessions/{first['session_id']}")
    expect(page.locator(".bubble.user").first).to_have_text("userPlan my week")
    expect(page.locator(".bubble.agent").first).to_contain_text("re: Plan my week")
    expect(page.locator("li.step .lbl").first).to_have_text("[thinking]")
    expect(page.locator("li.decision")).to_contain_text("usage-is-private")
    expect(page.locator("li.approval")).to_contain_text("pending")
    shots(page, "session-en")
    page.get_by_role("link", name="日本語").click()
    expect(page.locator("li.step .lbl").first).to_have_text("[思考]")
    expect(page.locator("li.step .lbl", has_text="承認待ち")).to_have_count(1)
    shots(page, "session-ja")
    for labels in ("ja", "en"):
        served = page.request.get(f"/sessions/{first['session_id']}/export.md?labels={labels}")
        cli = overt(cockpit, "export", first["session_id"], "--labels", labels)
        assert cli.returncode == 0, cli.stderr
        assert served.status == 200 and served.text() == cli.stdout
    page.goto("/sessions?channel=http&q=plan+my")
    expect(page.locator("table.sessions tbody tr")).to_have_count(1)
    shots(page, "sessions")
    page.context.close()


def test_a_session_is_found_by_a_word_of_a_later_message_typed_into_the_search(
        chromium: Any, cockpit: Cockpit, shots: Any) -> None:
    first = ask(cockpit.base, "Opening words only")
    ask(cockpit.base, "and later the albatross", session_id=first["session_id"])
    page = log_in(chromium, cockpit.base, OPERATOR)
    page.goto("/sessions")
    page.get_by_label("Text").fill("ALBATROSS")
    page.get_by_label("Text").press("Enter")
    rows = page.locator("table.sessions tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(first["session_id"])
    expect(rows.first).to_contain_text("Opening words only")
    shots(page, "sessions-search")
    page.context.close()
    audit = log_in(chromium, cockpit.base, AUDITOR)
    audit.goto("/sessions?q=albatross")
    expect(audit.get_by_label("Text")).to_have_count(0)
    expect(audit.get_by_role("note")).to_contain_text("needs trail.read")
    expect(audit.locator("table.sessions")).not_to_contain_text("Opening words only")
    shots(audit, "sessions-audit-only")
    audit.context.close()


def test_the_usage_totals_are_those_of_overt_usage(chromium: Any, cockpit: Cockpit,
                                                   shots: Any) -> None:
    ask(cockpit.base, "one more question, for the figures")
    page = log_in(chromium, cockpit.base, OPERATOR)
    page.goto("/usage?since=30d")
    cli = overt(cockpit, "usage", "--since", "30d", "--json")
    assert cli.returncode == 0, cli.stderr
    rows = json.loads(cli.stdout)["rows"]
    tokens = sum(r["input_tokens"] + r["output_tokens"] for r in rows)
    dollars = sum(r["cost_usd"] for r in rows)
    assert tokens > 0 and dollars > 0
    assert int(page.locator("#total-tokens").get_attribute("data-value") or "") == tokens
    shown = float(page.locator("#total-dollars").get_attribute("data-value") or "")
    assert abs(shown - dollars) < 1e-9
    expect(page.locator("svg.chart")).to_have_count(4)
    expect(page.locator("#usage-rows tbody tr")).to_have_count(len(rows))
    expect(page.get_by_text("dollars today")).to_be_visible()
    shots(page, "usage")
    page.context.close()


def test_memory_search_finds_a_node_and_shows_its_revisions_and_links(
        chromium: Any, cockpit: Cockpit, shots: Any) -> None:
    async def write() -> None:
        ledger = open_ledger(str(cockpit.db))
        try:
            store = store_for(ledger)
            who = Writer("operator:alice")
            db = await store.create_node("Decision", "Use SQLite by default",
                                         "One file, WAL, a writer thread.", who)
            await store.supersede(db, "Use SQLite by default",
                                  "One file, WAL, one writer thread with group commit.", who)
            pg = await store.create_node("Component", "PostgreSQL ledger",
                                         "Same schema, many workers.", who)
            await store.create_link("relates_to", db.root_id, pg.root_id, who)
        finally:
            await ledger.close()
    with ThreadPoolExecutor(1) as pool:  # playwright's loop runs on this thread
        pool.submit(asyncio.run, write()).result()
    page = log_in(chromium, cockpit.base, OPERATOR)
    page.goto("/memory")
    page.get_by_label("Words").fill("writer thread")
    page.get_by_role("button", name="Search").click()
    hit = page.locator("ol.hits li").first
    expect(hit).to_contain_text("Use SQLite by default")
    expect(page.locator("svg.graph")).to_be_visible()
    shots(page, "memory")
    hit.get_by_role("link").click()
    expect(page.locator("ol.revisions li")).to_have_count(2)
    expect(page.get_by_text("PostgreSQL ledger").first).to_be_visible()
    expect(page.locator(".body")).to_contain_text("group commit")
    shots(page, "memory-node")
    page.context.close()


def test_a_script_payload_in_a_message_shows_as_text_and_never_runs(
        chromium: Any, cockpit: Cockpit, shots: Any) -> None:
    page = log_in(chromium, cockpit.base, OPERATOR)
    answer = ask(cockpit.base, XSS)
    turn = page.locator(f"#turn-{answer['turn_id']}")
    expect(turn).to_contain_text("<script>window.__xss = 1</script>", timeout=WAIT_MS)
    assert turn.locator("img, script").count() == 0
    page.goto(f"/sessions/{answer['session_id']}")
    expect(page.locator(".bubble.user")).to_contain_text('<img src=x onerror=')
    assert page.locator("main img, main script").count() == 0
    assert page.evaluate("window.__xss") is None
    page.goto("/sessions?q=script")
    expect(page.locator("table.sessions")).to_contain_text("<script>")
    assert page.evaluate("window.__xss") is None
    csp = page.request.get("/live").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    shots(page, "xss-inert")
    page.context.close()


def test_verify_runs_from_the_ledger_page_and_reports_the_chain_ok(
        chromium: Any, cockpit: Cockpit, shots: Any) -> None:
    page = log_in(chromium, cockpit.base, OPERATOR)
    page.goto("/ledger")
    expect(page.locator("#verify-status")).to_contain_text("Not run")
    page.get_by_role("button", name="Run verify").click()
    expect(page.locator("#verify-status")).to_contain_text("entries verified",
                                                           timeout=WAIT_MS)
    expect(page.get_by_text("holds no signed checkpoint yet")).to_be_visible()
    shots(page, "ledger")
    page.context.close()


def test_a_running_verify_shows_the_rows_it_has_checked(
        chromium: Any, cockpit: Cockpit, shots: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    halfway, release = threading.Event(), threading.Event()
    reported = VerifyJob.progress

    def held_halfway(job: VerifyJob, checked: int, total: int) -> None:
        """The real report, then the verify's reader thread held at half way until
        the page has been looked at."""
        reported(job, checked, total)
        if checked * 2 >= total and not release.is_set():
            halfway.set()
            release.wait(60)
    monkeypatch.setattr(VerifyJob, "progress", held_halfway)
    page = log_in(chromium, cockpit.base, OPERATOR)
    try:
        page.goto("/ledger")
        page.get_by_role("button", name="Run verify").click()
        assert halfway.wait(60)
        expect(page.locator("#verify-status")).to_contain_text("rows checked",
                                                               timeout=WAIT_MS)
        # the page polls: a report from before the hold may still be shown; wait for
        # the one the verify is held at (it stays there until released)
        page.wait_for_function(
            "() => { const b = document.querySelector('#verify-progress');"
            " return b !== null && b.value * 2 >= b.max && b.value > 0; }",
            timeout=WAIT_MS)
        bar = page.locator("#verify-progress")
        checked, total = int(bar.get_attribute("value") or 0), int(bar.get_attribute("max") or 0)
        assert 0 < checked < total and checked * 2 >= total
        assert serious_violations(page) == []
        shots(page, "ledger-verifying")
    finally:
        release.set()
    expect(page.locator("#verify-status")).to_contain_text("entries verified",
                                                           timeout=WAIT_MS)
    page.context.close()


def test_the_newest_signed_checkpoint_is_shown_verified_on_the_ledger_page(
        chromium: Any, tmp_path: Path, shots: Any) -> None:
    ledger = open_ledger(str(tmp_path / "signed.db"))
    signer = make_signer(tmp_path)

    def sign() -> Any:
        add_turns(ledger, 5)
        return signer.checkpoint(ledger)[0]
    with ThreadPoolExecutor(1) as pool:  # playwright's loop runs on this thread
        checkpoint = pool.submit(sign).result()
    runtime = Runtime(model=FunctionModel(reply), ledger=ledger)
    app = create_app(runtime, TOKENS, extra_routes=cockpit_routes(
        runtime, TOKENS, checkpoint_key=signer.public))
    with uvicorn_server(app) as base:
        page = log_in(chromium, base, OPERATOR)
        page.goto("/ledger")
        expect(page.locator("#checkpoint-verdict")).to_contain_text("signature verifies")
        expect(page.locator("#checkpoint")).to_contain_text(f"{checkpoint.size} entries")
        expect(page.locator("#checkpoint")).to_contain_text(signer.public.key_id)
        assert serious_violations(page) == []
        shots(page, "ledger-checkpoint")
        page.context.close()


def test_no_page_has_a_serious_or_critical_accessibility_violation(
        chromium: Any, cockpit: Cockpit, shots: Any) -> None:
    answer = ask(cockpit.base, "a turn for the accessibility check")
    page = log_in(chromium, cockpit.base, OPERATOR)
    refused: list[str] = []  # what the Content-Security-Policy blocked, if anything
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy"
            in m.text else None)
    found = {}
    for path in (*PAGES, f"/sessions/{answer['session_id']}", "/memory?q=sqlite"):
        page.goto(path)
        violations = serious_violations(page)
        if violations:
            found[path] = violations
        shots(page, "page-" + path.strip("/").split("?")[0].replace("/", "-").replace(":", "_"))
    page.context.close()
    login = chromium.new_context(base_url=cockpit.base).new_page()
    login.goto("/login")
    if serious_violations(login):
        found["/login"] = serious_violations(login)
    login.context.close()
    assert found == {}
    assert refused == []


def test_every_page_answers_without_a_login_by_sending_the_browser_to_log_in(
        chromium: Any, cockpit: Cockpit, tmp_path: Path) -> None:
    page = chromium.new_context(base_url=cockpit.base).new_page()
    for path in PAGES:
        page.goto(path)
        expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.context.close()


def test_no_page_logs_a_console_error_and_no_long_word_widens_a_page(
        chromium: Any, cockpit: Cockpit) -> None:
    # found driving a live overt serve: every first page load logged a 404 (the browser's
    # /favicon.ico), and a message of one long word pushed the Sessions table off screen
    answer = ask(cockpit.base, "unbroken " + "x" * 3000)
    page = chromium.new_context(base_url=cockpit.base).new_page()  # listening from the start
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.text} ({page.url})")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{e} ({page.url})"))
    page.goto("/login")
    page.get_by_label("Token").fill(OPERATOR)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Live")).to_be_visible()
    wide = {}
    for path in (*PAGES, f"/sessions/{answer['session_id']}", "/sessions?q=unbroken"):
        page.goto(path)
        page.wait_for_load_state("load")
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        if widths[0] > widths[1]:
            wide[path] = widths
    page.context.close()
    assert errors == [] and wide == {}
