"""Turns in a real browser: the timeline (a failed call red, a held call amber), the
turns table (a bad filter, keyset pages, errors first), bodies made readable, the
permalinks, and "Prove this" downloaded and checked by ``overt ledger check-proof``;
at 1280 px and at 390 px, with axe-core finding nothing serious."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from overt.channels.http import create_app
from overt.events import InferenceRecorded, TurnCompleted, TurnStarted
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.types import ModelRequest, ModelResponse, ToolCall, Usage
from overt.web import cockpit_routes
from tests.ledger.proofs_helpers import make_signer
from tests.web.conftest import (
    ASSETS,
    AUDITOR,
    GRANTS,
    OPERATOR,
    RULE,
    TOKENS,
    Cockpit,
    cli_env,
    need_browser,
    uvicorn_server,
)

need_browser()
from playwright.sync_api import expect  # noqa: E402  (after the check: may be missing)

from tests.web.test_cockpit_live import ask, log_in  # noqa: E402

WIDTHS = (1280, 390)
ANSWER = ("Here is **bold** and `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
          "<script>window.__xss = 1</script>")


def reply(request: ModelRequest) -> ModelResponse:
    """``boom``: a call to a tool nobody offered; ``usage``: a call the policy holds;
    ``markdown``: an answer in Markdown with raw HTML in it; else an echo."""
    last = request.messages[-1]
    asked = [m.content for m in request.messages if m.role == "user"][-1]
    usage = Usage(100, 20)
    if last.role == "user" and "boom" in asked:
        return ModelResponse("", tool_calls=(ToolCall("c-boom", "no_such_tool", {"x": 1}),),
                             usage=usage, reasoning="[thinking] try a tool")
    if last.role == "user" and "usage" in asked:
        return ModelResponse("", tool_calls=(ToolCall("c-use", "get_usage",
                                                      {"period": "today"}),), usage=usage)
    if "markdown" in asked:
        return ModelResponse(ANSWER, usage=usage, reasoning="[plan] 1. answer in Markdown")
    return ModelResponse(f"re: {asked}", usage=usage)


class Served(Cockpit):
    turns: dict[str, str]
    public: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    project = tmp_path_factory.mktemp("turns")
    db = project / "ledger.db"
    ledger = open_ledger(str(db))
    gate = Gate(Policy([RULE]), Capabilities(GRANTS))
    runtime = Runtime(model=FunctionModel(reply, name="function"), ledger=ledger, gate=gate)
    signer = make_signer(project)
    app = create_app(runtime, TOKENS, extra_routes=cockpit_routes(
        runtime, TOKENS, checkpoint_key=signer.public))
    with uvicorn_server(app) as base:
        made = {}
        first = ask(base, "please answer in markdown")
        made["markdown"] = first["turn_id"]
        made["failed"] = ask(base, "boom now", session_id=first["session_id"])["turn_id"]
        made["held"] = ask(base, "usage for today", session_id=first["session_id"])["turn_id"]
        with ThreadPoolExecutor(1) as pool:  # playwright's loop runs on this thread
            pool.submit(record_escalation, ledger).result()
        made["escalated"] = "turn-escalated"
        for i in range(52):
            ask(base, f"filler {i}")
        with ThreadPoolExecutor(1) as pool:  # playwright's loop runs on this thread
            pool.submit(signer.checkpoint, ledger).result()
        cockpit = Served(base, runtime, db, project)
        cockpit.turns, cockpit.public = made, signer.public_path
        cockpit.session = first["session_id"]  # type: ignore[attr-defined]
        yield cockpit


def serious_violations(page: Any, width: int) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the whole page, at any ``width``."""
    page.evaluate((ASSETS / "axe.min.js").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = page.evaluate(
        "async () => (await axe.run(document)).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target)}))")
    return found


def record_escalation(ledger: Any) -> None:
    """A turn whose first model call was escalated to a stronger model, as the engine
    records one (the router's reissue), written through the ledger's API."""
    t, s = "turn-escalated", "cli:escalated"

    def inference(model: str, escalated: bool) -> InferenceRecorded:
        return InferenceRecorded(
            turn_id=t, session_id=s, inference_id=f"i-{model}", iteration=0, model=model,
            route="default", input_tokens=100, output_tokens=10, cost_usd=0.01,
            duration_ms=40.0, tools_offered=[], tool_calls_requested=0, stop_reason="end_turn",
            response_digest=None, escalated=escalated,
            escalation_reason="low_confidence" if escalated else None)
    asyncio.run(ledger.record([TurnStarted(
        turn_id=t, session_id=s, source="cli", caller_session_id="escalated",
        message_digest="sha256:00", model="small", route="default", max_tool_calls=5,
        actor="operator:alice")]))
    asyncio.run(ledger.record([inference("small", False)]))
    asyncio.run(ledger.record([inference("large", True)]))
    asyncio.run(ledger.record([TurnCompleted(
        turn_id=t, session_id=s, status="completed", reply_digest=None, tools_used=None,
        tool_calls=0, model_calls=2, input_tokens=200, output_tokens=20, cost_usd=0.02,
        duration_ms=90.0)]))


def no_sideways_scroll(page: Any, width: int) -> None:
    """The whole page, navigation included, fits ``width``."""
    whole = page.evaluate("document.documentElement.scrollWidth")
    assert whole <= width, f"the page scrolls sideways to {whole} px at {width} px"
    widest = page.evaluate("Math.max(...[...document.querySelectorAll('main *')]"
                           ".filter(e => !e.closest('.scroll-x'))"
                           ".map(e => e.getBoundingClientRect().right))")
    scrolled = page.evaluate("document.querySelector('main').scrollWidth")
    assert scrolled <= width and widest <= width, (
        f"the content reaches {max(scrolled, widest)} px at {width} px")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_failed_turn_shows_red_and_its_unknown_tool_by_name(
        chromium: Any, served: Served, shots: Any, width: int) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/turns/{served.turns['failed']}")
    expect(page.locator("#verdict")).to_have_class("badge tone-bad")
    expect(page.locator("#verdict")).to_contain_text("unknown tool")
    call = page.locator("li.span.tool")
    expect(call).to_have_class("span tone-bad tool")
    expect(call.locator(".what code")).to_have_text("no_such_tool")
    expect(page.locator("li.span.model")).to_have_count(2)
    call.locator("summary").first.click()
    expect(call.locator(".io")).to_contain_text('"x"')
    # the result is said once, on its call (a later request as sent holds it too: that
    # is what was sent); the engine's step quoting it is not a row of its own
    expect(call.get_by_text("not_allowed: unknown tool")).to_have_count(1)
    expect(page.locator("li.step", has_text="not_allowed")).to_have_count(0)
    no_sideways_scroll(page, width)
    assert serious_violations(page, width) == []
    shots(page, f"turn-failed-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_held_call_shows_amber_with_its_rule_and_why_once(
        chromium: Any, served: Served, shots: Any, width: int) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/turns/{served.turns['held']}")
    expect(page.locator("#verdict")).to_have_class("badge tone-held")
    call = page.locator("li.span.tool")
    expect(call).to_have_class("span tone-held tool")
    expect(call.locator("summary").first).to_contain_text("usage-is-private")
    expect(page.get_by_text("usage figures are shown after an operator approves")).to_have_count(1)
    call.locator("summary").first.click()
    expect(call.locator("a[href^='/approvals#req-']")).to_have_count(1)
    expect(call).to_contain_text("pending")
    no_sideways_scroll(page, width)


def test_an_answer_in_markdown_is_rendered_and_its_raw_html_shown_as_text(
        chromium: Any, served: Served, shots: Any) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    page.goto(f"/turns/{served.turns['markdown']}")
    answer = page.locator(".bubble.agent .md")
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("table td").first).to_have_text("1")
    expect(answer).to_contain_text("<script>window.__xss = 1</script>")
    assert page.evaluate("window.__xss") is None
    model = page.locator("li.span.model")
    model.locator("summary").first.click()
    expect(model.locator(".io .json details").first).to_be_visible()
    shots(page, "turn-markdown")


@pytest.mark.parametrize("width", WIDTHS)
def test_an_escalation_shows_both_model_calls_and_why(chromium: Any, served: Served,
                                                      shots: Any, width: int) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/turns/{served.turns['escalated']}")
    models = page.locator("li.span.model")
    expect(models).to_have_count(2)
    expect(models.nth(0).locator(".what")).to_have_text("model small")
    expect(models.nth(1).locator(".what")).to_contain_text("escalated: low_confidence")
    models.nth(1).locator("summary").first.click()
    expect(models.nth(1)).to_contain_text("escalated to a stronger model because low confidence")
    expect(page.locator("#verdict")).to_have_class("badge tone-ok")
    no_sideways_scroll(page, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_session_page_links_each_turn_and_says_what_failed(
        chromium: Any, served: Served, width: int) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/sessions/{served.session}")  # type: ignore[attr-defined]
    expect(page.locator("h1")).to_have_text("please answer in markdown")
    expect(page.locator("section.turn-log.tone-bad")).to_have_count(1)
    expect(page.locator("section.turn-log.tone-held")).to_have_count(1)
    expect(page.locator(".bubble.agent strong")).to_have_text("bold")
    no_sideways_scroll(page, width)
    assert serious_violations(page, width) == []
    page.locator("section.turn-log.tone-bad a.turn-link").click()
    expect(page).to_have_url(f"{served.base}/turns/{served.turns['failed']}")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_turns_table_pages_by_keyset_and_lists_errors_first(
        chromium: Any, served: Served, shots: Any, width: int) -> None:
    page = log_in(chromium, served.base, AUDITOR)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/turns")
    rows = page.locator("table.turns tbody tr")
    expect(rows).to_have_count(50)
    first_page = rows.first.inner_text()
    page.get_by_role("link", name="Next page →").click()
    assert "after=" in page.url and "offset" not in page.url
    expect(rows).to_have_count(6)
    assert rows.first.inner_text() != first_page
    page.get_by_role("link", name="Errors first").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_class("row-bad")
    no_sideways_scroll(page, width)
    assert serious_violations(page, width) == []
    shots(page, f"turns-table-{width}")


def test_a_bad_filter_keeps_the_form_and_says_what_to_fix(chromium: Any,
                                                         served: Served) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    response = page.goto("/turns?channel=cli&since=someday&order=sideways")
    assert response.status == 422
    expect(page.get_by_label("Channel")).to_have_value("cli")
    expect(page.get_by_label("Started since")).to_have_value("someday")
    expect(page.get_by_role("alert")).to_contain_text("since:")
    expect(page.get_by_role("alert")).to_contain_text("order:")


def test_an_entry_has_a_permalink_linked_from_its_turn(chromium: Any, served: Served) -> None:
    page = log_in(chromium, served.base, AUDITOR)
    page.goto(f"/turns/{served.turns['failed']}")
    # an actor without trail.read: no message for a title, no invented name, no bodies
    expect(page.locator("h1")).to_contain_text("Turn on http at")
    expect(page.locator("li.span.tool .what code")).to_have_text("unknown tool")
    expect(page.get_by_text("boom now")).to_have_count(0)
    expect(page.get_by_text("Inputs and outputs need")).to_have_count(3)
    page.get_by_role("link", name="entries").first.click()
    expect(page.locator("h1")).to_contain_text("turn.started")
    expect(page.locator("#entry")).to_contain_text(served.turns["failed"])
    assert page.goto("/ledger/entries/999999").status == 404
    assert page.goto("/ledger/entries/abc").status == 404
    assert page.goto("/ledger/entries/²").status == 404


def test_prove_this_downloads_a_proof_check_proof_accepts(chromium: Any, served: Served,
                                                          tmp_path: Path) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    page.goto(f"/turns/{served.turns['held']}")
    with page.expect_download() as got:
        page.get_by_role("link", name="Prove this").click()
    saved = tmp_path / "proof.json"
    got.value.save_as(saved)
    checked = subprocess.run(
        [sys.executable, "-m", "overt.cli", "ledger", "check-proof", str(saved), "--key",
         str(served.public)], cwd=served.project, env=cli_env(served.db),
        capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert saved.read_text().count('"format":"overt-inclusion-proof/2"') == 1
    bent = saved.read_text().replace('"scope":"turn"', '"scope":"turm"')
    (tmp_path / "bent.json").write_text(bent)
    refused = subprocess.run(
        [sys.executable, "-m", "overt.cli", "ledger", "check-proof", str(tmp_path / "bent.json"),
         "--key", str(served.public)], cwd=served.project, env=cli_env(served.db),
        capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0


@pytest.mark.parametrize("width", WIDTHS)
def test_the_sessions_table_pages_by_keyset_lists_errors_first_and_keeps_a_bad_filter(
        chromium: Any, served: Served, shots: Any, width: int) -> None:
    page = log_in(chromium, served.base, OPERATOR)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/sessions")
    rows = page.locator("table.sessions tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("filler 51")
    page.get_by_role("link", name="Next page →").click()
    assert "after=" in page.url
    expect(rows).to_have_count(4)
    expect(rows.last).to_contain_text("please answer in markdown")
    shots(page, f"sessions-page2-{width}")
    page.get_by_role("link", name="Errors first").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_class("row-bad")
    expect(rows.first.locator("td").nth(7)).to_have_text("1")
    no_sideways_scroll(page, width)
    assert serious_violations(page, width) == []
    shots(page, f"sessions-table-{width}")
    response = page.goto("/sessions?channel=http&since=last+tuesday")
    assert response.status == 422
    expect(page.get_by_label("Channel")).to_have_value("http")
    expect(page.get_by_label("Active since")).to_have_value("last tuesday")
    expect(page.get_by_role("alert")).to_contain_text("Active since: unknown period")
    for bad in ("99999999999999999999999", "²"):
        assert page.goto(f"/sessions?after={bad}").status == 422
        expect(page.get_by_role("alert")).to_contain_text("start again from the first page")
    assert page.goto("/turns?after=1:99999999999999999999999").status == 422


def test_live_shows_a_turn_with_a_failed_call_red_and_links_its_timeline(
        chromium: Any, served: Served) -> None:
    boom = ask(served.base, "boom on live")["turn_id"]
    held = ask(served.base, "usage on live")["turn_id"]
    page = log_in(chromium, served.base, OPERATOR)
    failed = page.locator(f"#turn-{boom} header a.badge")
    expect(failed).to_have_class("badge tone-bad")
    expect(failed).to_have_text("completed · unknown tool")
    expect(page.locator(f"#turn-{held} header a.badge")).to_have_class("badge tone-held")
    failed.click()
    expect(page).to_have_url(f"{served.base}/turns/{boom}")
