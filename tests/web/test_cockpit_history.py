"""Memory history, approvals with their context, and keyboard shortcuts, in Chromium
at 1280 and 390 px: a revision read as written with its diff and the call that wrote
it, labelled graph edges, an approval card saying who asked what, the reason an
actor has no buttons, Approve from a phone answering before the turn does, and j/k/a/?.
Each page touched is checked with axe-core (nothing serious or critical)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from overt.channels.auth import Tokens, token_digest
from overt.channels.http import create_app
from overt.ledger import open_ledger
from overt.memory.store import Node, Writer, store_for
from overt.models.fake import FunctionModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.types import ModelRequest, ModelResponse, ToolCall, Usage
from overt.web import cockpit_routes
from overt.web.timeline import call_anchor
from tests.web.conftest import (
    AUDITOR,
    CLIENT,
    GRANTS,
    OPERATOR,
    RULE,
    Cockpit,
    need_browser,
    uvicorn_server,
)

need_browser()
from playwright.sync_api import expect  # noqa: E402

from tests.web.test_cockpit_layout import overflow, whole_page_violations  # noqa: E402
from tests.web.test_cockpit_live import ask, log_in  # noqa: E402

WAIT_MS = 10_000
WIDTHS = (1280, 390)
CAROL = "ovt_carol-token"
TOKENS = Tokens({token_digest(OPERATOR): "operator:alice",
                 token_digest(AUDITOR): "operator:auditor",
                 token_digest(CLIENT): "mcp_client:claude-code",
                 token_digest(CAROL): "operator:carol"})
CAROL_GRANTS = {**GRANTS, "operator:carol": ["memory.read", "memory.write", "trail.read"]}
LONG_TITLE = "Deploy window for the billing service, agreed with finance on Tuesday afternoon"
FIRST = "Deploys happen on Tuesdays.\nOnly between 14:00 and 16:00.\nFinance signs off."
SECOND = ("Deploys happen on Tuesdays.\nOnly between 15:00 and 17:00, <b>never</b> "
          "at month end.\nFinance signs off.")
RELEASE = threading.Event()
"""Set: the model answers after a tool at once; cleared: it waits (a slow model)."""
RELEASE.set()


async def reply(request: ModelRequest) -> ModelResponse:
    """``remember: TEXT`` writes a node, ``revise ID`` supersedes it, ``usage`` asks for
    get_usage (held by the rule); after a tool it answers, once RELEASE is set."""
    last = request.messages[-1]
    asked = [m.content for m in request.messages if m.role == "user"][-1]
    usage = Usage(100, 20)
    n = str(len(request.messages))
    if last.role == "tool":
        while not RELEASE.is_set():
            await asyncio.sleep(0.05)
        return ModelResponse(f"Done: {last.content[:40]}", usage=usage,
                             reasoning="[execute] the tool answered")
    if asked.startswith("remember:"):
        call = ToolCall("call-w" + n, "node_create",
                        {"kind": "Decision", "title": LONG_TITLE, "body": FIRST})
    elif asked.startswith("revise "):
        call = ToolCall("call-r" + n, "node_supersede", {"id": asked.split()[1],
                                                          "body": SECOND})
    elif "usage" in asked.lower():
        call = ToolCall("call-u" + n, "get_usage", {"period": "today"})
    else:
        return ModelResponse(f"re: {asked}", usage=usage, reasoning="[thinking] plain")
    return ModelResponse("", tool_calls=(call,), usage=usage,
                         reasoning=f"[plan] 1. call {call.name}")


@pytest.fixture(scope="module")
def cockpit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cockpit]:
    project = tmp_path_factory.mktemp("history")
    db = project / "ledger.db"
    gate = Gate(Policy([RULE]), Capabilities(CAROL_GRANTS))
    runtime = Runtime(model=FunctionModel(reply, name="function"),
                      ledger=open_ledger(str(db)), gate=gate)
    app = create_app(runtime, TOKENS, extra_routes=cockpit_routes(runtime, TOKENS))
    with uvicorn_server(app) as base:
        yield Cockpit(base, runtime, db, project)


def in_thread(db: Path, job: Any) -> Any:
    """``job(store)`` run on a ledger of its own, off Playwright's loop."""
    async def go() -> Any:
        ledger = open_ledger(str(db))
        try:
            return await job(store_for(ledger))
        finally:
            await ledger.close()
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


@pytest.fixture(scope="module")
def written(cockpit: Cockpit) -> dict[str, Any]:
    """A node the agent wrote in one turn and revised in another, linked to a second."""
    first = ask(cockpit.base, "remember: the deploy window")
    async def newest(store: Any) -> Node:
        hits = await store.search("deploy window billing")
        return hits[0].node  # type: ignore[no-any-return]
    rev1 = in_thread(cockpit.db, newest)
    second = ask(cockpit.base, f"revise {rev1.id} with the new hours")
    async def linked(store: Any) -> tuple[Node, Node]:
        now = await store.current(rev1.root_id)
        other = await store.create_node("Component", "Billing service", "Bills.",
                                        Writer("operator:alice"))
        await store.create_link("relates_to", now.root_id, other.root_id,
                                Writer("operator:alice"))
        return now, other
    rev2, other = in_thread(cockpit.db, linked)
    assert rev2.revision == 2 and rev2.turn_id == second["turn_id"]
    return {"rev1": rev1, "rev2": rev2, "other": other, "first": first, "second": second}


def viewer(chromium: Any, cockpit: Cockpit, width: int, token: str = OPERATOR) -> Any:
    page = log_in(chromium, cockpit.base, token)
    page.set_viewport_size({"width": width, "height": 900})
    return page


def fits_and_passes_axe(page: Any) -> None:
    wide, inner = overflow(page)
    assert wide <= inner, f"{page.url} scrolls sideways to {wide} px at {inner} px"
    assert whole_page_violations(page) == [], page.url


@pytest.mark.parametrize("width", WIDTHS)
def test_an_old_revision_reads_as_written_with_its_diff_and_the_call_that_wrote_it(
        chromium: Any, cockpit: Cockpit, written: dict[str, Any], width: int,
        shots: Any) -> None:
    rev1, rev2 = written["rev1"], written["rev2"]
    page = viewer(chromium, cockpit, width)
    page.goto(f"/memory/{rev1.id}")
    expect(page.locator("#old-revision")).to_contain_text("revision 1")
    expect(page.locator(".body")).to_have_text(FIRST)  # the old body, not the current one
    assert page.locator("ol.diff").count() == 0  # nothing before the first revision
    written_by = page.locator("dd.provenance")
    expect(written_by).to_contain_text("node_create")
    expect(written_by.get_by_role("link", name=written["first"]["turn_id"])).to_have_attribute(
        "href", f"/turns/{written['first']['turn_id']}")
    fits_and_passes_axe(page)
    page.locator("ol.revisions").get_by_role("link", name="rev 2").click()
    expect(page.locator(".body")).to_have_text(SECOND)
    diff = page.locator("ol.diff")
    expect(diff.locator("li.d-del")).to_have_text(["removed: Only between 14:00 and 16:00."])
    expect(diff.locator("li.d-add")).to_have_text(
        ["added: Only between 15:00 and 17:00, <b>never</b> at month end."])
    assert diff.locator("b").count() == 0  # shown as the characters it is
    expect(diff.locator("li.d-same")).to_have_text(["Deploys happen on Tuesdays.",
                                                    "Finance signs off."])
    expect(page.locator(".diff-sum")).to_have_text("1 line removed, 1 added")
    call = page.locator("dd.provenance").get_by_role("link", name=re.compile("node_supersede"))
    turn = written["second"]["turn_id"]
    expect(call).to_have_attribute("href", f"/turns/{turn}#{call_anchor(rev2.tool_call_id)}")
    fits_and_passes_axe(page)
    if width == 1280:
        shots(page, "cockpit-memory-diff")
    call.click()
    expect(page).to_have_url(re.compile(f"/turns/{turn}"))
    expect(page.locator(f"#{call_anchor(rev2.tool_call_id)}")).to_contain_text("node_supersede")
    page.context.close()


def test_a_reader_who_may_not_read_the_previous_revision_gets_no_diff_of_it(
        chromium: Any, cockpit: Cockpit, written: dict[str, Any]) -> None:
    """carol holds memory.read but not memory.read_cross_actor: she revises the agent's
    node; her revision is hers to read, the agent's before it is not."""
    rev2 = written["rev2"]
    async def revise(store: Any) -> Node:
        other = await store.create_node("Note", "Agent's note", "agent secret line\nkept",
                                        Writer("agent:default"))
        node: Node = await store.supersede(other, "Carol's note", "carol's line\nkept",
                                           Writer("operator:carol"))
        return node
    mine = in_thread(cockpit.db, revise)
    page = viewer(chromium, cockpit, 390, CAROL)
    page.goto(f"/memory/{mine.id}")
    expect(page.locator(".body")).to_have_text("carol's line\nkept")
    expect(page.locator(".mem-diff")).to_contain_text("whose memory you may not read")
    assert page.locator("ol.diff").count() == 0
    assert "agent secret line" not in page.content() and "Agent's note" not in page.content()
    assert page.goto(f"/memory/{mine.supersedes}").status == 404
    assert page.goto(f"/memory/{rev2.id}").status == 404
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_graph_edges_carry_their_kind_and_labels_are_whole(
        chromium: Any, cockpit: Cockpit, written: dict[str, Any], width: int) -> None:
    page = viewer(chromium, cockpit, width)
    for path in ("/memory", f"/memory/{written['rev2'].id}"):
        page.goto(path)
        graph = page.locator("svg.graph").first
        expect(graph.locator("text.elbl")).to_contain_text(["relates_to"])
        assert LONG_TITLE in [t.strip() for t in graph.locator("a > title").all_text_contents()]
        label = graph.locator("a", has=page.locator(f"title:text-is('{LONG_TITLE}')"))
        lines = label.locator("tspan").all_text_contents()
        assert " ".join(lines) == LONG_TITLE  # wrapped, not cut
        box = graph.bounding_box()
        assert box is not None and box["width"] <= width
        height = label.locator("tspan").first.bounding_box()
        assert height is not None and height["height"] >= 9  # readable when scaled down
        fits_and_passes_axe(page)
    page.context.close()


def held(cockpit: Cockpit, text: str) -> dict[str, Any]:
    answer = ask(cockpit.base, text)
    assert answer["awaiting_approval"], answer
    return answer


@pytest.mark.parametrize("width", WIDTHS)
def test_an_approval_card_says_who_asked_what_under_which_rule_and_how_long_it_waits(
        chromium: Any, cockpit: Cockpit, width: int) -> None:
    text = f"usage figures please, from the card test at {width}"
    answer = held(cockpit, text)
    page = viewer(chromium, cockpit, width)
    page.goto("/approvals")
    card = page.locator(f"#req-{answer['awaiting_approval']}")
    expect(card.locator("dd.asker")).to_contain_text("mcp_client:claude-code")
    expect(card.locator(".asked")).to_contain_text(text)
    expect(card.locator("dd.rule")).to_have_text("usage-is-private")
    expect(card).to_contain_text("usage figures are shown after an operator approves")
    expect(card.locator("pre.args")).to_contain_text('"period": "today"')
    expect(card.locator(".badge.held")).to_have_text(re.compile(r"^(\d+h \d\dm|\d+m) left$"))
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    assert page.locator("#no-decide").count() == 0
    fits_and_passes_axe(page)
    page.context.close()
    audit = viewer(chromium, cockpit, width, AUDITOR)
    audit.goto("/approvals")
    card = audit.locator(f"#req-{answer['awaiting_approval']}")
    expect(card.locator("dd.asker")).to_contain_text("mcp_client:claude-code")
    assert card.locator(".asked").count() == 0 and text not in audit.content()
    assert card.get_by_role("button").count() == 0
    expect(audit.locator("#no-decide")).to_contain_text("approvals.decide")
    fits_and_passes_axe(audit)
    audit.context.close()


def scroll_to(card: Any) -> None:
    """Scroll ``card`` into view; the page's live list may swap it in for a new copy
    meanwhile (a card detached mid-scroll is found again, a few times at most)."""
    from playwright.sync_api import Error

    for attempt in range(3):
        try:
            card.scroll_into_view_if_needed()
            return
        except Error as exc:
            if "not attached" not in str(exc) or attempt == 2:
                raise


def test_approve_on_a_phone_answers_at_once_and_the_turn_answers_on_live_after(
        chromium: Any, cockpit: Cockpit, shots: Any) -> None:
    answer = held(cockpit, "usage for the phone, please")
    request_id = answer["awaiting_approval"]
    live = viewer(chromium, cockpit, 390)
    turn = live.locator(f"#turn-{answer['turn_id']}")
    expect(turn).to_have_attribute("data-status", "awaiting_approval", timeout=WAIT_MS)
    phone = live.context.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto("/approvals")
    card = phone.locator(f"#req-{request_id}")
    expect(card).to_be_visible()
    scroll_to(card)
    shots(phone, "cockpit-phone-approval")
    RELEASE.clear()  # the model now waits: a blocking Approve would never answer
    try:
        card.get_by_label("Reason").fill("ok from my phone")
        card.get_by_role("button", name="Approve").click()
        expect(phone.get_by_role("status")).to_contain_text(f"{request_id} approved")
        expect(phone.locator(f"#decided-{request_id}")).to_contain_text("operator:alice")
        assert turn.get_attribute("data-status") != "completed"
        fits_and_passes_axe(phone)
    finally:
        RELEASE.set()
    expect(turn).to_have_attribute("data-status", "completed", timeout=WAIT_MS)
    expect(turn).to_contain_text("Done:")
    live.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_j_and_k_move_between_turns_and_question_mark_lists_the_keys(
        chromium: Any, cockpit: Cockpit, width: int) -> None:
    first = ask(cockpit.base, f"one at {width}")
    session = first["session_id"]
    for text in ("two", "three"):
        ask(cockpit.base, text, session_id=session)
    page = viewer(chromium, cockpit, width)
    page.goto(f"/sessions/{session}")
    turns = page.locator("section.turn-log")
    expect(turns).to_have_count(3)
    focused = "e => document.activeElement === e"
    page.keyboard.press("j")
    assert turns.nth(0).evaluate(focused)
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert turns.nth(2).evaluate(focused)
    page.keyboard.press("j")  # stays on the last
    assert turns.nth(2).evaluate(focused)
    page.keyboard.press("k")
    assert turns.nth(1).evaluate(focused)
    page.keyboard.press("?")
    helper = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(helper).to_be_visible()
    expect(helper.locator("dt")).to_have_text(["j", "k", "a", "?", "Esc"])
    assert whole_page_violations(page) == []
    page.keyboard.press("Escape")
    expect(helper).to_be_hidden()
    page.keyboard.press("Control+j")  # a modifier held: not a shortcut
    assert turns.nth(1).evaluate(focused)
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_approves_the_focused_request_after_a_confirmation_and_not_while_typing(
        chromium: Any, cockpit: Cockpit, width: int) -> None:
    answer = held(cockpit, f"usage, approved with the a key at {width}")
    request_id = answer["awaiting_approval"]
    page = viewer(chromium, cockpit, width)
    page.goto("/approvals")
    card = page.locator(f"#req-{request_id}")
    reason = card.get_by_label("Reason")
    reason.fill("")
    reason.press_sequentially("a j k ?")  # typing: no shortcut fires
    expect(reason).to_have_value("a j k ?")
    assert page.locator("dialog[open]").count() == 0
    reason.fill("approved by key")
    page.keyboard.press("Escape")
    page.evaluate("document.activeElement.blur()")
    if page.locator("article.request").count() > 1:
        page.keyboard.press("a")  # none focused and several wait: says to choose one
        note = page.get_by_role("dialog", name="Approve")
        expect(note).to_contain_text("move to one with j or k first")
        note.get_by_role("button", name="Close").click()
    for _ in range(page.locator("article.request").count()):
        page.keyboard.press("j")
        if card.evaluate("e => document.activeElement === e"):
            break
    assert card.evaluate("e => document.activeElement === e")
    page.keyboard.press("a")
    confirm = page.get_by_role("dialog", name="Approve this call?")
    expect(confirm).to_contain_text(f"get_usage ({request_id})")
    assert whole_page_violations(page) == []
    page.keyboard.press("Enter")  # Cancel has the focus: Enter alone does not approve
    expect(confirm).to_be_hidden()
    expect(card).to_be_visible()
    card.focus()
    page.keyboard.press("a")
    page.get_by_role("dialog", name="Approve this call?").get_by_role(
        "button", name="Approve").click()
    expect(page.get_by_role("status")).to_contain_text(f"{request_id} approved")
    page.context.close()
