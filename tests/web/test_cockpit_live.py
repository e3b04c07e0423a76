"""Logging in, the Live page and the Approvals page, in a real browser."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import httpx2 as httpx

from tests.web.conftest import AUDITOR, CLIENT, OPERATOR, Cockpit, cli_env, need_browser

need_browser()
from playwright.sync_api import expect  # noqa: E402  (after the check: may be missing)

WAIT_MS = 10_000


def log_in(browser: Any, base: str, token: str) -> Any:
    page = browser.new_context(base_url=base).new_page()
    page.goto("/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Live")).to_be_visible()
    return page


def ask(base: str, text: str, token: str = CLIENT, **body: Any) -> dict[str, Any]:
    r = httpx.post(f"{base}/v1/messages", json={"text": text, **body},
                   headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def test_a_token_logs_in_and_a_wrong_one_is_refused(chromium: Any, cockpit: Cockpit,
                                                    shots: Any) -> None:
    page = chromium.new_context(base_url=cockpit.base).new_page()
    page.goto("/live")
    expect(page).to_have_url(re.compile("/login$"))
    page.get_by_label("Token").fill("ovt_not-a-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("not one this server knows")
    shots(page, "login")
    page.get_by_label("Token").fill(OPERATOR)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_text("operator:alice")).to_be_visible()
    cookie = next(c for c in page.context.cookies() if c["name"] == "overt_cockpit")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.context.close()


def test_a_turn_from_the_http_api_appears_on_live_with_its_steps(chromium: Any,
                                                                   cockpit: Cockpit,
                                                                   shots: Any) -> None:
    page = log_in(chromium, cockpit.base, OPERATOR)
    answer = ask(cockpit.base, "What is the capital of France?")
    turn = page.locator(f"#turn-{answer['turn_id']}")
    expect(turn).to_be_visible(timeout=WAIT_MS)
    expect(turn).to_contain_text("re: What is the capital of France?")
    expect(turn.locator("ol.steps li")).to_have_text(["thinking", "plan"])
    expect(turn).to_contain_text("completed")
    expect(turn).to_contain_text("function")
    shots(page, "live")
    page.context.close()


def test_a_held_call_approved_in_the_page_then_answers_on_live(chromium: Any,
                                                              cockpit: Cockpit,
                                                              shots: Any) -> None:
    live = log_in(chromium, cockpit.base, OPERATOR)
    held = ask(cockpit.base, "How much usage today?")
    request_id = held["awaiting_approval"]["request_id"] if isinstance(
        held["awaiting_approval"], dict) else held["awaiting_approval"]
    turn = live.locator(f"#turn-{held['turn_id']}")
    expect(turn).to_have_attribute("data-status", "awaiting_approval", timeout=WAIT_MS)
    approvals = live.context.new_page()
    approvals.goto("/approvals")
    card = approvals.locator(f"#req-{request_id}")
    expect(card).to_contain_text("usage-is-private")
    expect(card).to_contain_text('"period": "today"')
    shots(approvals, "approvals")
    card.get_by_label("Reason").fill("fine for today")
    card.get_by_role("button", name="Approve").click()
    expect(approvals.get_by_role("status")).to_contain_text(f"{request_id} approved")
    expect(turn).to_have_attribute("data-status", "completed", timeout=WAIT_MS)
    expect(turn).to_contain_text("Usage figures:")
    live.context.close()


def test_a_decision_from_the_cli_shows_in_an_open_approvals_page(chromium: Any,
                                                                cockpit: Cockpit) -> None:
    page = log_in(chromium, cockpit.base, OPERATOR)
    held = ask(cockpit.base, "usage please, decided from a terminal")
    request_id = held["awaiting_approval"]
    page.goto("/approvals")
    expect(page.locator(f"#req-{request_id}")).to_be_visible()
    script = cockpit.project / "answer.jsonl"
    script.write_text('{"tool_calls": [{"name": "get_usage", "arguments": {}}]}\n'
                      '{"text": "Decided in a terminal."}\n', encoding="utf-8")
    env = {**cli_env(cockpit.db), "OVERT_MODEL": f"scripted:{script}"}
    done = subprocess.run([sys.executable, "-m", "overt.cli", "approvals", "deny", request_id,
                           "--reason", "not now"], cwd=cockpit.project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    expect(page.locator(f"#req-{request_id}")).to_have_count(0, timeout=WAIT_MS)
    expect(page.locator(f"#decided-{request_id}")).to_contain_text("denied")
    expect(page.locator(f"#decided-{request_id}")).to_contain_text("operator:default")
    page.context.close()


def test_approve_is_reached_with_the_tab_key_and_pressed_with_enter(chromium: Any,
                                                                   cockpit: Cockpit) -> None:
    page = log_in(chromium, cockpit.base, OPERATOR)
    held = ask(cockpit.base, "usage, approved from the keyboard")
    request_id = held["awaiting_approval"]
    page.goto("/approvals")
    approve = page.locator(f"#req-{request_id}").get_by_role("button", name="Approve")
    expect(approve).to_be_visible()
    for _ in range(60):
        page.keyboard.press("Tab")
        if approve.evaluate("b => document.activeElement === b"):
            break
    else:
        raise AssertionError("Tab never reached the Approve button")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"{request_id} approved")
    page.context.close()


def test_an_actor_without_content_rights_sees_no_bodies(chromium: Any, cockpit: Cockpit,
                                                        shots: Any) -> None:
    secret = "the secret question about payroll numbers"
    answer = ask(cockpit.base, secret)
    held = ask(cockpit.base, "usage figures, held for the auditor to see")
    page = log_in(chromium, cockpit.base, AUDITOR)
    turn = page.locator(f"#turn-{answer['turn_id']}")
    expect(turn).to_contain_text("completed")
    expect(turn.locator("ol.steps li")).to_have_count(2)
    shots(page, "live-audit-only")
    assert secret not in page.content()
    page.goto(f"/sessions/{answer['session_id']}")
    expect(page.locator("li.step")).to_have_count(2)
    assert secret not in page.content() and "re: " not in page.content()
    assert page.get_by_role("link", name="Export Markdown").count() == 0
    page.goto("/approvals")
    card = page.locator(f"#req-{held['awaiting_approval']}")
    expect(card).to_contain_text("arguments hidden")
    assert card.locator("pre.args").count() == 0
    assert card.get_by_role("button", name="Approve").count() == 0
    export = page.request.get(f"/sessions/{answer['session_id']}/export.md")
    assert export.status == 403
    page.context.close()


def test_a_post_without_the_csrf_token_is_refused(chromium: Any, cockpit: Cockpit) -> None:
    page = log_in(chromium, cockpit.base, OPERATOR)
    held = ask(cockpit.base, "usage, for a forged approval")
    request_id = held["awaiting_approval"]
    forged = page.request.post(f"/approvals/{request_id}/approve", form={"reason": "x"})
    assert forged.status == 403
    wrong = page.request.post(f"/approvals/{request_id}/approve",
                              form={"reason": "x", "csrf": "guess"})
    assert wrong.status == 403
    assert page.request.post("/logout").status == 403
    assert page.request.post("/ledger/verify").status == 403
    page.goto("/approvals")
    expect(page.locator(f"#req-{request_id}")).to_be_visible()  # still pending
    page.context.close()
