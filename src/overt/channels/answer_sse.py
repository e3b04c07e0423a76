"""A turn's answer over Server-Sent Events, as the model writes it (``POST /v1/messages``
with ``"stream": true`` or ``Accept: text/event-stream``).

Events, each ``data:`` one line of JSON:

- ``delta``: ``{"text": ...}``, the next piece of the answer;
- ``reset``: ``{"reason": "tool_call" | "reissue" | "replaced"}``, the text sent
  since the last reset is withdrawn (it was not the answer);
- ``error``: ``{"error": {"code", "message"}}``, instead of ``done`` when the
  turn could not be run or its record could not be kept (the ledger failed:
  the same codes as the JSON answer's 503s);
- ``done``: the same object a request without streaming is answered with
  (``text``, ``turn_id``, ``session_id``, ``usage``, ``awaiting_approval``, …);
  its ``text`` is what the deltas since the last reset add up to, unless
  ``wait_s`` let a paused turn's later answer replace the approval notice.

The contract of deltas and resets is :mod:`overt.engine.answer_stream`'s. The
turn runs in its own task: a client that goes away mid-stream stops the
events, not the turn, which completes and is recorded as if it had stayed.
A comment line is sent when nothing was for ``keepalive_s``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from overt.engine.answer_stream import AnswerDelta, AnswerEvent, AnswerSink
from overt.errors import OvertError
from overt.types import ResponseResult

log = logging.getLogger("overt.channels.http")

KEEPALIVE_S = 15.0

Turn = Callable[[AnswerSink], Awaitable[ResponseResult]]
Finish = Callable[[ResponseResult], Awaitable[tuple[str, dict[str, Any]]]]
"""The last event of a stream, from the turn's result: ``("done", reply)`` or
``("error", {"error": {"code", "message"}})``."""


def event(kind: str, payload: dict[str, Any]) -> str:
    """One SSE event."""
    return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


class Turns:
    """The turns that answer streams run, kept until they end (a client may leave first)."""

    def __init__(self) -> None:
        self.running: set[asyncio.Task[Any]] = set()

    def start(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        async def run() -> Any:
            return await work

        task = asyncio.ensure_future(run())
        self.running.add(task)
        task.add_done_callback(self.running.discard)
        return task

    async def drain(self) -> None:
        """Wait for every running turn to end (at shutdown, before the runtime closes)."""
        while self.running:
            await asyncio.wait(set(self.running))


async def answer_events(turns: Turns, turn: Turn, finish: Finish, *,
                        keepalive_s: float = KEEPALIVE_S) -> AsyncIterator[str]:
    """Run ``turn`` with a sink that feeds this stream; the answer's events, then
    the event ``finish(result)`` makes."""
    queue: asyncio.Queue[AnswerEvent | None] = asyncio.Queue()

    async def work() -> tuple[str, dict[str, Any]]:
        try:
            return await finish(await turn(queue.put_nowait))
        finally:
            queue.put_nowait(None)

    task = turns.start(work())
    while True:
        try:
            item = await asyncio.wait_for(queue.get(), keepalive_s)
        except TimeoutError:
            yield ": keep-alive\n\n"
            continue
        if item is None:
            break
        if isinstance(item, AnswerDelta):
            yield event("delta", {"text": item.text})
        else:
            yield event("reset", {"reason": item.reason})
    try:
        kind, payload = await task
    except OvertError as exc:
        log.error("a streamed turn could not run: %s", exc)
        kind, payload = "error", {"error": {"code": "backend_error", "message": str(exc)}}
    yield event(kind, payload)
