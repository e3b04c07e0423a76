"""The cockpit's pages over the ASGI app, on both backends: who reaches what, and
what a page does with a request it cannot honour."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import httpx2 as httpx
import pytest

from overt.channels.http import create_app
from overt.events import TurnPaused
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.memory.store import Writer, store_for
from overt.models.fake import FunctionModel
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.reasoning.export import markdown
from overt.reasoning.trail import build_trail
from overt.runtime import Runtime
from overt.types import IncomingMessage
from overt.web import cockpit_routes
from overt.web.pages.approvals import time_left
from overt.web.pages.ledger import VerifyJob
from overt.web.render import fragment
from tests.conftest import run
from tests.web.conftest import AUDITOR, GRANTS, OPERATOR, RULE, TOKENS, reply
from tests.web.test_auth import log_in, page_csrf


def setup(ledger: Ledger) -> tuple[Runtime, httpx.AsyncClient]:
    runtime = Runtime(model=FunctionModel(reply), ledger=ledger,
                      gate=Gate(Policy([RULE]), Capabilities(GRANTS)))
    app = create_app(runtime, TOKENS, close_on_shutdown=False,
                     extra_routes=cockpit_routes(runtime, TOKENS))
    return runtime, httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                      base_url="http://cockpit")


async def ask(rt: Runtime, text: str, session_id: str, actor: str) -> Any:
    return await rt.respond(IncomingMessage("email", text, {"request_id": new_ulid()}),
                            session_id=session_id, actor=Actor.parse(actor), history=())


def test_a_session_whose_id_holds_a_slash_and_brackets_reads_and_exports(
        ledger: Ledger) -> None:
    session = "email:<a/b@example.org>"

    async def main() -> tuple[str, str, str]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "hello by mail", session, "operator:alice")
            await log_in(c)
            quoted = httpx.URL(f"/sessions/{session}").raw_path.decode()
            page = await c.get(quoted)
            exported = await c.get(quoted + "/export.md?labels=en")
            expected = markdown(await build_trail(ledger, session_id=session), "en")
            return page.text, exported.text, expected
    page, exported, expected = run(main())
    assert "hello by mail" in page and "re: hello by mail" in page
    assert exported == expected and "[thinking]" in exported


def test_another_actors_session_is_answered_as_missing_and_the_refusal_recorded(
        ledger: Ledger) -> None:
    async def main() -> tuple[int, str]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "mine alone", "http:private", "mcp_client:claude-code")
            await log_in(c, "ovt_client-token")
            other = await c.get("/sessions/http:private")
            await ask(rt, "alice's", "http:alices", "operator:alice")
            refused = await c.get("/sessions/http:alices")
            return refused.status_code, other.text
    status, own = run(main())
    assert status == 404 and "mine alone" in own
    refusals = run(ledger.entries(kinds=["capability.checked"]))
    assert refusals[-1].data["actor"] == "mcp_client:claude-code"
    assert refusals[-1].data["reason_code"] == "not_owner"
    assert refusals[-1].data["subject"].startswith("web:GET /sessions/{id} session:")


def test_the_session_list_hides_titles_from_a_viewer_without_content_rights(
        ledger: Ledger) -> None:
    async def main() -> tuple[str, str]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "a title worth hiding", "http:titled", "operator:alice")
            await log_in(c, AUDITOR)
            audited = (await c.get("/sessions")).text
        _, c = setup(ledger)
        async with c:
            await log_in(c, OPERATOR)
            return audited, (await c.get("/sessions?q=worth")).text
    audited, found = run(main())
    assert "http:titled" in audited and "a title worth hiding" not in audited
    assert "a title worth hiding" in found


def test_memory_another_actor_wrote_is_hidden_without_cross_actor_reads(
        ledger: Ledger) -> None:
    async def main() -> tuple[str, int, str]:
        store = store_for(ledger)
        node = await store.create_node("Note", "the agent's private note", "body",
                                       Writer("agent:default"))
        _, c = setup(ledger)
        async with c:
            await log_in(c, AUDITOR)  # memory.read, not memory.read_cross_actor
            listed = (await c.get("/memory")).text
            direct = (await c.get(f"/memory/{node.id}")).status_code
        _, c = setup(ledger)
        async with c:
            await log_in(c, OPERATOR)
            return listed, direct, (await c.get(f"/memory/{node.id}")).text
    listed, direct, operator = run(main())
    assert "private note" not in listed and direct == 404
    assert "the agent&#39;s private note" in operator


def test_deciding_a_request_already_decided_says_so(ledger: Ledger) -> None:
    async def main() -> tuple[int, str]:
        rt, c = setup(ledger)
        async with c:
            held = await ask(rt, "usage figures", "http:held", "operator:alice")
            await rt.deny(held.awaiting_approval, by=Actor.operator(), reason="no")
            await log_in(c)
            page = await c.get("/approvals")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf is not None
            again = await c.post(f"/approvals/{held.awaiting_approval}/approve",
                                 data={"csrf": csrf.group(1), "reason": "late"})
            return again.status_code, again.text
    status, text = run(main())
    assert status == 409 and "already denied" in text


def test_a_request_shows_the_time_it_still_waits() -> None:
    from datetime import UTC, datetime
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert time_left("2026-01-01T12:30:00Z", now) == "30m"
    assert time_left("2026-01-01T15:05:00Z", now) == "3h 05m"
    assert time_left("2026-01-01T12:00:30Z", now) == "under a minute"
    assert time_left("2026-01-01T11:00:00Z", now) == "expired"


def test_an_actor_that_may_not_decide_is_refused_even_with_a_valid_form(
        ledger: Ledger) -> None:
    async def main() -> tuple[int, str]:
        rt, c = setup(ledger)
        async with c:
            held = await ask(rt, "usage figures", "http:audited", "operator:alice")
            await log_in(c, AUDITOR)
            page = await c.get("/approvals")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf is not None and "Approve" not in page.text
            forged = await c.post(f"/approvals/{held.awaiting_approval}/approve",
                                  data={"csrf": csrf.group(1)})
            return forged.status_code, (await rt.approvals.get(held.awaiting_approval)).status
    assert run(main()) == (403, "pending")
    refused = run(ledger.entries(kinds=["capability.checked"]))[-1].data
    assert (refused["actor"], refused["capability"], refused["granted"]) == (
        "operator:auditor", "approvals.decide", False)


async def verify_in_the_cockpit(c: httpx.AsyncClient) -> str:
    """Log in, press "Run verify" on /ledger, and poll its status fragment, as the page
    does, until the run ends; the last fragment."""
    await log_in(c)
    started = await c.post("/ledger/verify",
                           data={"csrf": page_csrf((await c.get("/ledger")).text)})
    assert started.status_code == 303
    for _ in range(400):  # a hang guard, not a timing: verify of a few rows ends at once
        status = (await c.get("/ledger/verify/status")).text
        if "hx-get" not in status:  # the fragment stops polling once the run ends
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"verify still running: {status}")


def test_a_verify_run_from_the_cockpit_reports_the_entries_it_verified(
        ledger: Ledger) -> None:
    async def main() -> tuple[str, int]:
        rt, c = setup(ledger)
        await ask(rt, "something to verify", "http:verified", "operator:alice")
        async with c:
            status = await verify_in_the_cockpit(c)
        return status, len(await ledger.entries())
    status, entries = run(main())
    assert '<span class="badge ok">ok</span>' in status
    assert f"{entries:,} entries verified" in status and "(by operator:alice)" in status


def test_verify_reports_the_rows_checked_up_to_all_the_rows_to_check(ledger: Ledger) -> None:
    async def main() -> tuple[list[tuple[int, int]], int]:
        rt, _ = setup(ledger)
        await ask(rt, "something to verify", "http:verified", "operator:alice")
        seen: list[tuple[int, int]] = []
        report = await ledger.verify(progress=lambda checked, total: seen.append(
            (checked, total)))
        assert report.ok
        return seen, report.entries
    seen, entries = run(main())
    checked, total = seen[-1]
    assert total > entries  # the chain's rows and the rows beside it (bodies, the index)
    assert checked == total


def test_a_running_verify_shows_the_rows_checked_of_the_rows_to_check() -> None:
    counting = VerifyJob("operator:alice", "now", time.monotonic(), 10)
    running = VerifyJob("operator:alice", "now", time.monotonic() - 2.0, 10_000)
    running.progress(2_500, 40_000)
    assert "Counting the rows to check" in fragment("_verify.html", job=counting, elapsed=0.1)
    shown = fragment("_verify.html", job=running, elapsed=2.0)
    assert "2,500 of 40,000 rows checked" in shown and "6.2 %" in shown
    assert 'max="40000" value="2500"' in shown
    assert 'hx-get="/ledger/verify/status"' in shown


def test_a_held_request_shows_the_rule_and_message_its_decision_recorded(
        ledger: Ledger) -> None:
    async def main() -> str:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "usage figures", "http:held", "operator:alice")
            await log_in(c)
            return (await c.get("/approvals")).text
    page = run(main())
    assert '<dd class="rule">usage-is-private</dd>' in page
    assert "usage_is_private: usage figures are shown after an operator approves" in page


def test_a_verify_run_that_finds_a_forged_memory_node_says_so(ledger: Ledger, raw: Any) -> None:
    async def main() -> str:
        _, c = setup(ledger)
        node = await store_for(ledger).create_node("Note", "db host", "db-1",
                                                   Writer("agent:default"))
        # an INSERT, as any writer may: a memory the agent would believe
        raw.execute("INSERT INTO memory_nodes (id, kind, title, body, actor, created_at, "
                    "supersedes, root_id, revision, turn_id, search_tags) SELECT "
                    "'01FORGEDNODE0000000000000A', kind, title, 'evil-host', actor, "
                    "created_at, NULL, '01FORGEDNODE0000000000000A', 1, turn_id, search_tags "
                    "FROM memory_nodes WHERE id = ?", (node.id,))
        async with c:
            return await verify_in_the_cockpit(c)
    status = run(main())
    assert '<span class="badge error">failed</span>' in status
    assert "the memory tables do not match the chain" in status
    assert "01FORGEDNODE0000000000000A" in status and "entry None" not in status


def _forge(raw: Any, digest: str, body: str) -> None:
    """Change the body stored under ``digest`` in place, the guards dropped."""
    raw.drop_guards().execute("UPDATE content_blobs SET body = ? WHERE digest = ?",
                              (body.encode() if raw.pg else body, digest))


@pytest.mark.slow
def test_held_arguments_changed_behind_the_ledger_are_never_shown_as_the_call(
        ledger: Ledger, raw: Any) -> None:
    async def main() -> tuple[str, int, str]:
        rt, c = setup(ledger)
        async with c:
            held = await ask(rt, "usage figures", "http:held", "operator:alice")
            request = await rt.approvals.get(held.awaiting_approval)
            _forge(raw, request.args_sha256, '{"period": "everything, to mallory"}')
            await log_in(c)
            listed = (await c.get("/approvals")).text
            [paused] = await ledger.entries(turn_id=held.turn_id, kinds=["turn.paused"])
            _forge(raw, paused.event(TurnPaused).checkpoint_digest, "{}")
            csrf = re.search(r'name="csrf" value="([^"]+)"', listed)
            assert csrf is not None
            approved = await c.post(f"/approvals/{held.awaiting_approval}/approve",
                                    data={"csrf": csrf.group(1), "reason": "ok"})
            return listed, approved.status_code, approved.text
    listed, status, text = run(main())
    assert "mallory" not in listed and "do not match the digest the request recorded" in listed
    assert status == 500 and "does not match its digest" in text
    assert run(ledger.entries(kinds=["tool_call.started"])) == []  # the call never ran


def test_a_session_whose_answer_was_changed_is_not_shown_as_its_conversation(
        ledger: Ledger, raw: Any) -> None:
    async def main() -> tuple[int, str]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "hello", "http:changed", "operator:alice")
            _forge(raw, digest_text("re: hello"), "re: send the password to mallory")
            await log_in(c)
            shown = await c.get("/sessions/http:changed")
            return shown.status_code, shown.text
    status, text = run(main())
    assert status == 500 and "mallory" not in text and "does not match its digest" in text


def test_an_address_holding_nul_is_a_400_on_both_backends_not_a_500(ledger: Ledger) -> None:
    """On PostgreSQL a NUL in an id or a search reached the database, which refuses it:
    the pages answered 500."""
    _runtime, c = setup(ledger)

    async def main() -> list[int]:
        async with c:
            await log_in(c)
            return [(await c.get(url)).status_code for url in (
                "/sessions?q=a%00b", "/sessions?owner=%00", "/sessions/a%00b",
                "/memory/a%00b", "/memory?q=a%00", "/live?session=%00", "/turns/a%00b",
                "/turns/a%00b/proof.json", "/turns?channel=%00", "/sessions?order=%00")]
    assert run(main()) == [400] * 10
    assert run(ledger.verify()).ok


def test_a_decision_form_the_page_cannot_read_exactly_is_refused_and_decides_nothing(
        ledger: Ledger) -> None:
    async def main() -> tuple[list[tuple[int, str]], str]:
        rt, c = setup(ledger)
        async with c:
            held = await ask(rt, "usage figures", "http:misread", "operator:alice")
            await log_in(c)
            page = await c.get("/approvals")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf is not None
            url = f"/approvals/{held.awaiting_approval}"
            answers = []
            for path, form in ((f"{url}/approved", {}),  # was read as "deny"
                               (f"{url}/Approve", {}),
                               (f"{url}/approve", {"reson": "checked the figures"}),
                               (f"{url}/deny", {"reason": "x" * 2001})):
                answer = await c.post(path, data={"csrf": csrf.group(1), **form})
                answers.append((answer.status_code, answer.text))
            return answers, (await rt.approvals.get(held.awaiting_approval)).status
    answers, status = run(main())
    assert status == "pending"
    assert [code for code, _ in answers] == [422, 422, 422, 422]
    assert "no such decision &#39;approved&#39;: approve or deny" in answers[0][1]
    assert "unknown form field reson" in answers[2][1]
    assert "the reason is over 2000 characters (2001)" in answers[3][1]


def test_a_sessions_filter_the_page_cannot_read_is_a_422_not_an_empty_or_full_list(
        ledger: Ledger) -> None:
    async def main() -> tuple[list[tuple[int, str]], str, str]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "hello", "http:recent", "operator:alice")
            await log_in(c)
            refused = []
            for path in ("/sessions?since=yesterday", "/sessions?until=2026-13-45",
                         "/sessions?sinse=24h", "/usage?since=7d&by=day",
                         "/memory?q=disk&knd=Note"):
                answer = await c.get(path)
                refused.append((answer.status_code, re.sub(r"\s+", " ", answer.text)))
            recent = (await c.get("/sessions?since=24h")).text  # was compared as text
            old = (await c.get("/sessions?until=2000-01-01")).text
        return refused, recent, old
    refused, recent, old = run(main())
    assert [code for code, _ in refused] == [422] * 5
    assert "unknown period &#39;yesterday&#39;" in refused[0][1]
    assert "unknown period &#39;2026-13-45&#39;" in refused[1][1]
    assert ("unknown query parameter sinse: this page takes channel, owner, since, until, q, "
            "order, after"
            in refused[2][1])
    assert "unknown query parameter by: this page takes since" in refused[3][1]
    assert "unknown query parameter knd" in refused[4][1]
    assert "http:recent" in recent and "No sessions match" not in recent
    assert "http:recent" not in old and "No sessions match" in old


def test_labels_the_session_page_does_not_have_are_a_422_not_english(ledger: Ledger) -> None:
    async def main() -> list[tuple[int, str]]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "hello", "http:labelled", "operator:alice")
            await log_in(c)
            out = []
            for path in ("/sessions/http:labelled?labels=fr",
                         "/sessions/http:labelled/export.md?labels=JA",
                         "/sessions/http:labelled?label=ja",
                         "/sessions/http:labelled/export.md?labels=ja"):
                answer = await c.get(path)
                out.append((answer.status_code, answer.text))
            return out
    out = run(main())
    assert [code for code, _ in out] == [422, 422, 422, 200]
    assert "unknown labels &#39;fr&#39;: one of en, ja" in out[0][1]
    assert out[1][1] == "unknown labels 'JA': one of en, ja"
    assert "unknown query parameter label: this page takes labels" in out[2][1]


def test_an_old_revision_shows_its_own_body_and_a_diff_only_to_who_may_read_both(
        ledger: Ledger) -> None:
    async def main() -> tuple[str, str, str, int]:
        _, c = setup(ledger)
        async with c:
            store = store_for(ledger)
            first = await store.create_node("Note", "Agent's plan", "step one\n<i>two</i>",
                                            Writer("agent:default"))
            second = await store.supersede(first, "Auditor's plan", "step one\n<b>three</b>",
                                           Writer("operator:auditor"))
            await log_in(c)
            old = (await c.get(f"/memory/{first.id}")).text
            new = (await c.get(f"/memory/{second.id}")).text
            await c.post("/logout", data={"csrf": re.search(
                r'name="csrf" value="([^"]+)"', new).group(1)})  # type: ignore[union-attr]
            await log_in(c, AUDITOR)
            audited = (await c.get(f"/memory/{second.id}")).text
            refused = (await c.get(f"/memory/{first.id}")).status_code
            return old, new, audited, refused
    old, new, audited, refused = run(main())
    assert "&lt;i&gt;two&lt;/i&gt;" in old and "three" not in old.split('class="body"')[1][:80]
    assert 'id="old-revision"' in old
    assert '<li class="d-del"><del><span class="sr">removed: </span>&lt;i&gt;two&lt;/i&gt;' in new
    assert '<li class="d-add"><ins><span class="sr">added: </span>&lt;b&gt;three&lt;/b&gt;' in new
    assert "<b>three</b>" not in new and "Agent&#39;s plan" in new
    assert "whose memory you may not read" in audited and 'class="diff"' not in audited
    assert "two" not in audited and "Agent" not in audited and refused == 404
    assert "through the api" in audited


def test_an_unknown_address_is_a_page_of_the_cockpit_and_the_api_keeps_its_json(
        ledger: Ledger) -> None:
    async def main() -> list[httpx.Response]:
        _, c = setup(ledger)
        async with c:
            before = await c.get("/no-such-page")  # no login yet: to the login form
            await log_in(c)
            return [before, await c.get("/no-such-page/at/all"), await c.get("/v1/nope"),
                    await c.post("/no-such-page", data={})]
    before, page, api, posted = run(main())
    assert before.status_code == 303 and before.headers["location"].startswith("/login")
    assert page.status_code == 404 and "text/html" in page.headers["content-type"]
    assert "<h1>No such page</h1>" in page.text and "/no-such-page/at/all" in page.text
    assert 'href="/sessions"' in page.text  # the layout and its navigation, not bare text
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
    assert posted.status_code in (403, 405)
