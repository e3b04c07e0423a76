"""Work a process repeats in the background while a block runs (a server's look for
approvals nobody took up, a channel's look for answers owed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress


@asynccontextmanager
async def repeating(work: Callable[[], Awaitable[object]], every_s: float | None,
                    name: str) -> AsyncIterator[None]:
    """While the block runs, ``await work()`` every ``every_s`` seconds (``None``:
    never), in a task called ``name``, cancelled when the block ends. ``work`` handles
    its own failures: one it raises ends the repeating and is raised as the block ends.
    """
    if every_s is None:
        yield
        return

    async def loop() -> None:
        while True:
            await asyncio.sleep(every_s)
            await work()

    task = asyncio.create_task(loop(), name=name)
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):  # cancelled here, as the block ended
            await task
