"""Live's controls on both backends: the filter (session, channel, status), older
turns by keyset, a running turn's tokens so far, a failed turn's kind and message;
and the navigation and times every page shares."""

from __future__ import annotations

import asyncio
from typing import Any

from markupsafe import Markup

from overt.errors import ModelError
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.types import IncomingMessage, ModelRequest, ModelResponse
from overt.web.live import RECENT_TURNS, LiveFilter, _turn_events
from overt.web.render import clock, nav
from tests.conftest import run
from tests.web.conftest import GRANTS, RULE, reply
from tests.web.test_live import TIMEOUT, ask, hub_of, viewer


def failing(request: ModelRequest) -> ModelResponse:
    """``reply``, except that a message naming ``boom`` makes the model fail."""
    asked = [m.content for m in request.messages if m.role == "user"][-1]
    if "boom" in asked:
        raise ModelError("the upstream model answered 529: overloaded <now>")
    return reply(request)


def runtime_on(ledger: Ledger) -> Runtime:
    return Runtime(model=FunctionModel(failing, name="function"), ledger=ledger,
                   gate=Gate(Policy([RULE]), Capabilities(GRANTS)))


async def ask_on(rt: Runtime, text: str, source: str = "http",
                 actor: str = "mcp_client:claude-code", session_id: str | None = None) -> Any:
    message = IncomingMessage(source, text, {"request_id": new_ulid()})
    return await rt.respond(message, session_id=session_id or message.caller_session_id,
                            actor=Actor.parse(actor), history=())


def test_older_turns_come_a_page_at_a_time_by_keyset_with_none_lost_or_repeated(
        ledger: Ledger) -> None:
    async def main() -> tuple[list[str], list[str], list[str], int | None]:
        rt = runtime_on(ledger)
        asked = [(await ask(rt, f"question {i}")).turn_id for i in range(RECENT_TURNS + 5)]
        hub = hub_of(rt)
        alice = viewer(rt, "operator:alice")
        first, older = await hub.recent(alice)
        assert older is not None
        second, last = await hub.recent(alice, before=older)
        return asked, [v.turn_id for v in first], [v.turn_id for v in second], last
    asked, first, second, last = run(main())
    assert first == asked[::-1][:RECENT_TURNS]
    assert second == asked[::-1][RECENT_TURNS:]
    assert last is None


def test_the_filter_keeps_to_one_session_one_channel_one_status(ledger: Ledger) -> None:
    async def main() -> dict[str, list[str]]:
        rt = runtime_on(ledger)
        plain = await ask_on(rt, "plain over http")
        by_mail = await ask_on(rt, "plain over email", source="email")
        failed = await ask_on(rt, "boom please")
        held = await ask_on(rt, "usage please")
        hub = hub_of(rt)
        alice = viewer(rt, "operator:alice")
        got = {}
        for name, chosen in {"email": LiveFilter(channel="email"),
                             "bad": LiveFilter(status="bad"),
                             "ok": LiveFilter(status="ok"),
                             "running": LiveFilter(status="running"),
                             "session": LiveFilter(session=plain.session_id),
                             "nobody": LiveFilter(session="no-such-session")}.items():
            views, _ = await hub.recent(alice, chosen)
            got[name] = [v.turn_id for v in views]
        ids = {"plain": plain.turn_id, "mail": by_mail.turn_id, "failed": failed.turn_id,
               "held": held.turn_id}
        return {k: [next(n for n, i in ids.items() if i == t) for t in v]
                for k, v in got.items()}
    got = run(main())
    assert got == {"email": ["mail"], "bad": ["failed"], "ok": ["mail", "plain"],
                   "running": ["held"], "session": ["plain"], "nobody": []}


def test_a_session_filter_never_opens_another_actors_session(ledger: Ledger) -> None:
    async def main() -> list[str]:
        rt = runtime_on(ledger)
        theirs = await ask_on(rt, "someone else's question")
        hub = hub_of(rt)
        views, _ = await hub.recent(viewer(rt, "mcp_client:other"),
                                    LiveFilter(session=theirs.session_id))
        return [v.turn_id for v in views]
    assert run(main()) == []


def test_a_filtered_stream_adds_only_the_turns_its_filter_admits(ledger: Ledger) -> None:
    async def main() -> tuple[str, str, str]:
        rt = runtime_on(ledger)
        hub = hub_of(rt)
        events = _turn_events(hub, viewer(rt, "operator:alice"), LiveFilter(channel="email"))
        await anext(events)
        await anext(events)
        other = await ask_on(rt, "over http")
        wanted = await ask_on(rt, "over email", source="email")
        added = ""
        while f"turn-{wanted.turn_id}" not in added:
            added += await asyncio.wait_for(anext(events), TIMEOUT)
        await events.aclose()
        return added, other.turn_id, wanted.turn_id
    added, other, wanted = run(main())
    assert f"turn-{wanted}" in added and f"turn-{other}" not in added


def test_a_failed_turn_shows_its_kind_and_message_and_a_running_one_its_tokens(
        ledger: Ledger) -> None:
    async def main() -> tuple[str, str, str]:
        rt = runtime_on(ledger)
        failed = await ask_on(rt, "boom please")
        held = await ask_on(rt, "usage please")  # paused after one model call
        hub = hub_of(rt)
        alice, auditor = viewer(rt, "operator:alice"), viewer(rt, "operator:auditor")
        bad = await hub.turn(failed.turn_id)
        waiting = await hub.turn(held.turn_id)
        assert bad is not None and waiting is not None
        return (await hub.render(bad, alice), await hub.render(bad, auditor),
                await hub.render(waiting, alice))
    bad, bad_audit, waiting = run(main())
    assert "model error" in bad and "(ModelError)" in bad
    assert "the upstream model answered 529: overloaded &lt;now&gt;" in bad
    assert "overloaded" not in bad_audit and "content tier" in bad_audit
    assert "so far (1 model call)" in waiting and "0 in / 0 out" not in waiting


def test_a_turn_before_its_first_model_call_says_running_not_zero_tokens(
        ledger: Ledger) -> None:
    async def main() -> str:
        gate = asyncio.Event()

        async def slow(request: ModelRequest) -> ModelResponse:
            await gate.wait()
            return reply(request)
        rt = Runtime(model=FunctionModel(slow, name="function"), ledger=ledger,
                     gate=Gate(Policy([RULE]), Capabilities(GRANTS)))
        hub = hub_of(rt)
        turn = asyncio.ensure_future(ask_on(rt, "take your time"))
        for _ in range(200):
            views, _ = await hub.recent(viewer(rt, "operator:alice"))
            if views:
                break
            await asyncio.sleep(0.02)
        shown = await hub.render(views[0], viewer(rt, "operator:alice"))
        gate.set()
        await turn
        return shown
    shown = run(main())
    assert "running, none yet" in shown and "0 in / 0 out" not in shown


def test_the_navigation_offers_only_the_pages_an_actor_may_open(ledger: Ledger) -> None:
    rt = runtime_on(ledger)
    links = {name: [k for k, _ in nav(viewer(rt, name))]
             for name in ("operator:alice", "operator:auditor", "mcp_client:claude-code")}
    assert links == {
        "operator:alice": ["live", "approvals", "sessions", "usage", "memory", "ledger"],
        "operator:auditor": ["live", "approvals", "sessions", "usage", "memory", "ledger"],
        "mcp_client:claude-code": ["live", "approvals", "sessions", "memory"]}


def test_a_time_is_a_time_element_with_its_zone_and_escapes_what_it_is_given() -> None:
    assert clock("2026-11-29T00:31:07.123456Z") == Markup(
        '<time datetime="2026-11-29T00:31:07.123456Z">2026-11-29 00:31:07 UTC</time>')
    assert "<b>" not in clock('2026"><b>x</b>')
    assert clock(None) == "–"


def test_a_rare_status_reads_at_most_scan_turns_then_offers_older_from_there(
        ledger: Ledger, monkeypatch: Any) -> None:
    import overt.web.live as live
    monkeypatch.setattr(live, "SCAN", 3)

    async def main() -> tuple[list[str], int | None, list[str], int | None, str]:
        rt = runtime_on(ledger)
        failed = await ask_on(rt, "boom first")
        for i in range(4):
            await ask_on(rt, f"fine {i}")
        hub = hub_of(rt)
        alice = viewer(rt, "operator:alice")
        first, older = await hub.recent(alice, LiveFilter(status="bad"))
        assert older is not None
        second, last = await hub.recent(alice, LiveFilter(status="bad"), before=older)
        return ([v.turn_id for v in first], older, [v.turn_id for v in second], last,
                failed.turn_id)
    first, older, second, last, failed = run(main())
    assert first == [] and older is not None
    assert second == [failed] and last is None
