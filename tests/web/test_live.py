"""The Live feed: the hub that follows the ledger, turns folded from their entries,
and the event stream a page holds, on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

from overt.ids import new_ulid
from overt.ledger.base import Entry, Ledger
from overt.models.fake import FunctionModel
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.sessions.access import SessionAccess
from overt.types import IncomingMessage
from overt.web.live import LiveHub, _hand, _turn_events, sse_event
from overt.web.turns import fold
from overt.web.viewer import Viewer
from tests.conftest import run
from tests.web.conftest import GRANTS, RULE, reply

TIMEOUT = 5.0


def runtime_on(ledger: Ledger) -> Runtime:
    return Runtime(model=FunctionModel(reply, name="function"), ledger=ledger,
                   gate=Gate(Policy([RULE]), Capabilities(GRANTS)))


def hub_of(rt: Runtime) -> LiveHub:
    return LiveHub(rt.ledger, lambda: SessionAccess(rt.ledger, rt.gate.capabilities))


def viewer(rt: Runtime, actor: str) -> Viewer:
    return Viewer(Actor.parse(actor), rt.gate.capabilities)


async def ask(rt: Runtime, text: str, actor: str = "mcp_client:claude-code") -> Any:
    message = IncomingMessage("http", text, {"request_id": new_ulid()})
    return await rt.respond(message, session_id=message.caller_session_id,
                            actor=Actor.parse(actor), history=())


def test_a_turn_folds_into_its_steps_calls_model_route_and_cost(ledger: Ledger) -> None:
    async def main() -> Any:
        rt = runtime_on(ledger)
        held = await ask(rt, "usage please")
        await rt.approve(held.awaiting_approval, by=Actor.operator())
        return fold(await ledger.entries(turn_id=held.turn_id))
    view = run(main())
    assert view.status == "completed" and view.source == "http"
    assert [s.phase for s in view.steps][:3] == ["thinking", "plan", "waiting_approval"]
    call = next(iter(view.calls.values()))
    assert (call.tool_name, call.status, call.effect, call.rule) == (
        "get_usage", "ok", "ask", "usage-is-private")
    assert call.duration_ms is not None and view.model == "function"
    assert view.inferences == 2 and view.input_tokens > 0


def test_a_paused_turn_reads_as_awaiting_approval_with_its_request(ledger: Ledger) -> None:
    async def main() -> tuple[Any, str]:
        rt = runtime_on(ledger)
        held = await ask(rt, "usage now")
        return fold(await ledger.entries(turn_id=held.turn_id)), \
            held.awaiting_approval
    view, request_id = run(main())
    assert (view.status, view.waiting_on) == ("awaiting_approval", request_id)
    assert next(iter(view.calls.values())).status == "held"


async def drain(queue: asyncio.Queue[list[Entry]]) -> list[Entry]:
    """The batches in ``queue`` up to the one holding a ``turn.completed``."""
    got: list[Entry] = []
    while not any(e.kind == "turn.completed" for e in got):
        got += await asyncio.wait_for(queue.get(), TIMEOUT)
    return got


def test_the_hub_hands_every_subscriber_the_entries_appended_after_it_subscribed(
        ledger: Ledger) -> None:
    async def main() -> tuple[list[str], list[str], int]:
        rt = runtime_on(ledger)
        await ask(rt, "before anyone watched")
        hub = hub_of(rt)
        async with hub.subscribe() as one, hub.subscribe() as two:
            answer = await ask(rt, "while two watch")
            first, second = await drain(one), await drain(two)
            listening = hub.listeners
        turns = {e.turn_id for e in first}
        assert turns == {answer.turn_id}
        return [e.kind for e in first], [e.kind for e in second], listening
    first, second, listening = run(main())
    assert first == second and first[0] == "turn.started" and "turn.completed" in first
    assert listening == 2


def background() -> set[asyncio.Task[Any]]:
    """The tasks running beside the test's own (the hub's feed, once a page listens)."""
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


def test_the_hub_stops_following_when_the_last_page_leaves(ledger: Ledger) -> None:
    async def main() -> tuple[int, bool]:
        hub = hub_of(runtime_on(ledger))
        async with hub.subscribe():
            following = background()
        assert following  # the hub follows the ledger while a page listens
        _, still_running = await asyncio.wait(following, timeout=TIMEOUT)
        return hub.listeners, not still_running
    assert run(main()) == (0, True)


def test_a_page_stream_starts_with_the_turns_so_far_then_adds_a_new_one_on_top(
        ledger: Ledger) -> None:
    async def main() -> tuple[str, str, str]:
        rt = runtime_on(ledger)
        old = await ask(rt, "an older question")
        hub = hub_of(rt)
        events = _turn_events(hub, viewer(rt, "operator:alice"))
        retry = await anext(events)
        reset = await anext(events)
        new = await ask(rt, "a <b>new</b> question")
        added = await asyncio.wait_for(anext(events), TIMEOUT)
        await events.aclose()
        assert f'id="turn-{old.turn_id}"' in reset and f"turn-{new.turn_id}" in added
        return retry, reset, added
    retry, reset, added = run(main())
    assert retry.startswith("retry:")
    assert reset.startswith("event: turns\n") and 'hx-swap-oob="innerHTML"' in reset
    assert 'hx-swap-oob="afterbegin:#turns"' in added
    assert "a &lt;b&gt;new&lt;/b&gt; question" in added and "<b>new</b>" not in added


def test_a_page_stream_shows_only_the_sessions_its_viewer_may_reach(ledger: Ledger) -> None:
    async def main() -> str:
        rt = runtime_on(ledger)
        hub = hub_of(rt)
        events = _turn_events(hub, viewer(rt, "mcp_client:other"))
        await anext(events)
        await anext(events)
        await ask(rt, "someone else's question")
        mine = await ask(rt, "my own question", actor="mcp_client:other")
        added = await asyncio.wait_for(anext(events), TIMEOUT)
        await events.aclose()
        assert f"turn-{mine.turn_id}" in added
        return added
    added = run(main())
    assert "someone else" not in added


def test_a_viewer_without_content_rights_gets_the_turn_without_its_text(
        ledger: Ledger) -> None:
    async def main() -> str:
        rt = runtime_on(ledger)
        answer = await ask(rt, "a private question")
        view = fold(await ledger.entries(turn_id=answer.turn_id))
        assert view is not None
        return await hub_of(rt).render(view, viewer(rt, "operator:auditor"))
    html = run(main())
    assert "private question" not in html and "thinking" in html and "completed" in html


def test_an_sse_event_puts_each_line_of_its_data_in_its_own_field() -> None:
    assert sse_event("turns", "<a>\n<b>") == "event: turns\ndata: <a>\ndata: <b>\n\n"


def test_a_page_too_far_behind_is_handed_one_reset_instead_of_all_it_missed(
        ledger: Ledger) -> None:
    async def main() -> list[list[Entry]]:
        rt = runtime_on(ledger)
        await ask(rt, "something recorded")
        entries = await ledger.entries()
        queue: asyncio.Queue[list[Entry]] = asyncio.Queue(2)
        for entry in entries[:3]:
            _hand(queue, [entry])
        return [queue.get_nowait() for _ in range(queue.qsize())]
    assert run(main()) == [[]]


def test_the_hub_stops_following_a_ledger_that_was_closed_without_logging_errors(
        ledger: Ledger, caplog: Any) -> None:
    """A server shutting down closes its ledger while pages may still hold the feed:
    the feed ends, it does not log an error at each retry until it is cancelled."""
    import logging

    async def main() -> bool:
        hub = hub_of(runtime_on(ledger))
        async with hub.subscribe():
            [task] = background()  # the hub's feed
            await ledger.close()
            await asyncio.wait_for(asyncio.shield(task), TIMEOUT)
            return task.done()
    with caplog.at_level(logging.INFO, logger="overt"):
        assert run(main())
    assert "the live feed stopped: the ledger was closed" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
