"""A turn's event stream: pushed when the ledger appends, resumed after Last-Event-ID,
bounded in time; over real HTTP (uvicorn) with a client that reconnects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2 as httpx
import pytest

from overt.channels.events_stream import last_event_id, turn_events
from overt.channels.http import create_app
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.ledger.notify import AppendSignal, Backoff
from overt.runtime import Runtime
from overt.types import IncomingMessage
from tests.channels.helpers import (
    OPERATOR,
    TOKENS,
    USAGE_CALL,
    auth,
    make_runtime,
    uvicorn_server,
)
from tests.conftest import run

NEVER = Backoff(floor_s=3600, ceiling_s=3600)
"""A back-off that never looks again by itself: only an append can wake the stream."""


def parsed(chunks: list[str]) -> list[tuple[int, str]]:
    """(id, event kind) of each SSE event in ``chunks``."""
    out = []
    for block in "".join(chunks).split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(":"))
        if "id" in fields:
            out.append((int(fields["id"]), fields["event"]))
    return out


async def paused_turn(rt: Runtime) -> tuple[str, str]:
    """A turn held for approval: (turn id, request id)."""
    result = await rt.respond(IncomingMessage("http", "usage?", {"request_id": "r1"}))
    assert result.awaiting_approval is not None
    return result.turn_id, result.awaiting_approval


async def read_until(stream: AsyncIterator[str], kind: str, into: list[str]) -> None:
    async for chunk in stream:
        into.append(chunk)
        if f"event: {kind}\n" in chunk:
            return


def test_a_followed_stream_is_woken_by_the_ledger_append_not_by_a_timer(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[tuple[int, str]]:
        rt = make_runtime(ledger, tmp_path, [USAGE_CALL, "You used 0 tokens."])
        turn_id, request_id = await paused_turn(rt)
        stream = turn_events(ledger, turn_id, backoff=NEVER)
        chunks: list[str] = []
        await asyncio.wait_for(read_until(stream, "turn.paused", chunks), 30)
        rest = asyncio.create_task(read_until(stream, "turn.completed", chunks))
        await rt.approve(request_id)
        await asyncio.wait_for(rest, 30)  # an hour's back-off: only the append woke it
        assert [c async for c in stream] == []  # and the stream ended with the turn
        return parsed(chunks)
    events = run(main())
    kinds = [k for _, k in events]
    assert kinds[0] == "turn.started" and "turn.paused" in kinds and "turn.resumed" in kinds
    assert kinds[-1] == "turn.completed"
    assert [i for i, _ in events] == sorted({i for i, _ in events})  # in order, once each


def test_another_process_append_is_read_within_the_back_off_ceiling(
        ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    async def main() -> list[tuple[int, str]]:
        rt = make_runtime(ledger, tmp_path, [USAGE_CALL])
        turn_id, request_id = await paused_turn(rt)
        chunks: list[str] = []
        stream = turn_events(ledger, turn_id, backoff=Backoff(floor_s=0.01, ceiling_s=0.05))
        await asyncio.wait_for(read_until(stream, "turn.paused", chunks), 30)
        other = open_ledger(ledger_url)  # what another process appends signals nothing here
        try:
            elsewhere = make_runtime(other, tmp_path / "other", ["You used 0 tokens."])
            await elsewhere.approve(request_id)
            await asyncio.wait_for(read_until(stream, "turn.completed", chunks), 30)
        finally:
            await other.close()
        return parsed(chunks)
    kinds = [k for _, k in run(main())]
    assert kinds[-1] == "turn.completed" and "turn.resumed" in kinds


def test_a_stream_after_its_last_event_id_sends_only_what_came_after(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> tuple[list[tuple[int, str]], list[tuple[int, str]], list[str]]:
        rt = make_runtime(ledger, tmp_path, ["Hello."])
        result = await rt.respond(IncomingMessage("http", "hi", {"request_id": "r1"}))
        whole = [c async for c in turn_events(ledger, result.turn_id, follow=False)]
        middle = parsed(whole)[1][0]
        after = [c async for c in turn_events(ledger, result.turn_id, after_seq=middle,
                                              backoff=NEVER)]
        last = parsed(whole)[-1][0]
        done = [c async for c in turn_events(ledger, result.turn_id, after_seq=last,
                                             backoff=NEVER)]
        return parsed(whole), parsed(after), done
    whole, after, done = run(main())
    assert after == whole[2:] and after[-1][1] == "turn.completed"
    assert parsed(done) == []  # a reconnect after the end ends at once, with nothing again
    assert done == ["retry: 1000\n\n"]


def test_a_stream_ends_when_its_lifetime_is_over(ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[str]:
        rt = make_runtime(ledger, tmp_path, [USAGE_CALL])
        turn_id, _ = await paused_turn(rt)
        ticks = iter(range(1000))  # a clock that moves one second a reading
        return [c async for c in turn_events(ledger, turn_id, lifetime_s=3, backoff=NEVER,
                                             clock=lambda: float(next(ticks)))]
    chunks = run(main())
    assert parsed(chunks)[-1][1] == "turn.paused"
    assert chunks[-1].startswith(": this stream's lifetime is over")


def test_an_append_signal_wakes_waiters_on_other_threads_loops() -> None:
    signal = AppendSignal()

    async def waiter() -> bool:
        return await signal.wait(0, 30)

    async def main() -> bool:
        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)  # let it wait
        await asyncio.to_thread(signal.notify, 7)
        return await asyncio.wait_for(task, 30)
    assert run(main()) is True
    assert signal.seq == 7
    assert run(signal.wait(7, 0)) is False and run(signal.wait(6, 30)) is True


def test_a_malformed_last_event_id_is_refused() -> None:
    assert last_event_id(None) == 0 and last_event_id(" 42 ") == 42
    for bad in ("x", "-1", "1.5", "1_0", "+3", "\u0663"):  # int() reads the last three
        with pytest.raises(ValueError):
            last_event_id(bad)


def test_over_http_a_client_reconnecting_with_last_event_id_resumes_where_it_left(
        ledger: Ledger, tmp_path: Path) -> None:
    rt = make_runtime(ledger, tmp_path, [USAGE_CALL, "You used 0 tokens."])
    app = create_app(rt, TOKENS, close_on_shutdown=False)

    async def main(base: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]],
                                       list[tuple[int, str]], int]:
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=auth(OPERATOR)) as c:
            asked = (await c.post("/v1/messages", json={"text": "usage?"})).json()
            path = f"/v1/turns/{asked['turn_id']}/events"
            first: list[str] = []
            async with c.stream("GET", path) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                await asyncio.wait_for(read_until(response.aiter_text(), "turn.paused",
                                                  first), 30)
            # the client dropped; meanwhile the turn is approved and answers
            await c.post(f"/v1/approvals/{asked['awaiting_approval']}/approve", json={})
            seen = parsed(first)[-1][0]
            second: list[str] = []
            async with c.stream("GET", path, headers={"Last-Event-ID": str(seen)}) as response:
                await asyncio.wait_for(read_until(response.aiter_text(), "turn.completed",
                                                  second), 30)
            whole = (await c.get(path, params={"follow": "false"})).text
            bad = await c.get(path, headers={"Last-Event-ID": "yesterday"})
            return parsed(first), parsed(second), parsed([whole]), bad.status_code

    with uvicorn_server(app) as base:
        first, second, whole, bad = run(main(base))
    assert first[-1][1] == "turn.paused" and second[-1][1] == "turn.completed"
    assert first + second == whole  # nothing replayed, nothing skipped
    assert bad == 422



def test_a_waiter_for_one_turn_is_not_woken_by_appends_to_others() -> None:
    signal = AppendSignal()

    async def main() -> tuple[bool, bool, bool]:
        waiting = asyncio.create_task(signal.wait(0, 30, turn_id="T1"))
        await asyncio.sleep(0)
        signal.notify(5, ["T2", None])
        await asyncio.sleep(0)
        still = not waiting.done()
        signal.notify(6, ["T1"])
        woken = await asyncio.wait_for(waiting, 30)
        return still, woken, await signal.wait(5, 0, turn_id="T1")
    assert run(main()) == (True, True, True)
    assert run(signal.wait(6, 0, turn_id="T1")) is False


def test_a_signal_remembers_the_last_appends_of_a_bounded_number_of_turns() -> None:
    signal = AppendSignal(turns_kept=2)
    for seq, turn in enumerate(["A", "B", "C"], start=1):
        signal.notify(seq, [turn])
    assert run(signal.wait(0, 0, turn_id="C")) is True
    assert run(signal.wait(0, 0, turn_id="A")) is False  # forgotten: the next look finds it


def test_a_stream_whose_ledger_cannot_be_read_ends_asking_the_client_to_reconnect(
        ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[str]:
        rt = make_runtime(ledger, tmp_path, [USAGE_CALL])
        turn_id, _ = await paused_turn(rt)
        chunks: list[str] = []
        stream = turn_events(ledger, turn_id, backoff=Backoff(floor_s=0.01, ceiling_s=0.01))
        await read_until(stream, "turn.paused", chunks)
        await ledger.close()  # the database went away
        chunks.extend([c async for c in stream])
        return chunks
    chunks = run(main())
    assert parsed(chunks)[-1][1] == "turn.paused"
    assert chunks[-1].startswith(": the ledger cannot be read now: reconnect")
