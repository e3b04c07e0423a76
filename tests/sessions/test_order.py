"""Messages of one session are answered one after the other, each turn reading the
ones before it; other sessions' turns run beside them."""

from __future__ import annotations

import asyncio

from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel
from overt.runtime import Runtime
from overt.types import IncomingMessage, ModelRequest
from tests.conftest import run


def _slow_echo(seen: list[tuple[str, ...]], busy: list[int]) -> FunctionModel:
    """A model that takes its time; ``busy``: [calls under way, the most at once]."""
    async def reply(request: ModelRequest) -> str:
        asked = tuple(m.content for m in request.messages if m.role == "user")
        seen.append(asked)
        busy[0] += 1
        busy[1] = max(busy)
        await asyncio.sleep(0.2)
        busy[0] -= 1
        return f"answer to {asked[-1]}"
    return FunctionModel(reply)


def _message(text: str, session: str) -> IncomingMessage:
    return IncomingMessage("http", text, {"session_id": session})


def test_a_message_sent_while_the_session_s_last_is_answered_waits_and_reads_it(
        ledger: Ledger) -> None:
    seen: list[tuple[str, ...]] = []
    busy = [0, 0]
    runtime = Runtime(model=_slow_echo(seen, busy), ledger=ledger, tools=[])

    async def main() -> list[str]:
        first = asyncio.create_task(runtime.respond(_message("what is my usage?", "s1"),
                                                    session_id="s1"))
        while not seen:  # the first turn is under way: its model is answering
            await asyncio.sleep(0.005)
        second = await runtime.respond(_message("and yesterday?", "s1"), session_id="s1")
        return [(await first).text, second.text]

    texts = run(main())
    assert texts == ["answer to what is my usage?", "answer to and yesterday?"]
    # the second turn began once the first had ended, and read its exchange
    assert seen == [("what is my usage?",), ("what is my usage?", "and yesterday?")]
    assert busy[1] == 1
    assert run(ledger.verify()).ok


def test_turns_of_different_sessions_run_at_the_same_time(ledger: Ledger) -> None:
    seen: list[tuple[str, ...]] = []
    busy = [0, 0]
    runtime = Runtime(model=_slow_echo(seen, busy), ledger=ledger, tools=[])

    async def main() -> None:
        await asyncio.gather(*(runtime.respond(_message(f"q{n}", f"s{n}"), session_id=f"s{n}")
                               for n in range(4)))

    run(main())
    assert busy[1] == 4  # all four model calls under way at once
    assert sorted(seen) == [("q0",), ("q1",), ("q2",), ("q3",)]
