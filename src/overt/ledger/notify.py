"""A signal that this process appended to the ledger, for readers that follow it.

A reader that follows the ledger (an SSE stream, a request waiting for a paused
turn's answer) waits on :meth:`AppendSignal.wait` instead of polling: each
backend calls :meth:`AppendSignal.notify` with the last ``seq`` it committed,
from whichever thread committed it (PostgreSQL's writer thread, the caller's
thread for SQLite), and every waiter, on whichever event loop, wakes.

It sees this process's appends only. Another process's (``overt approvals
approve`` resuming a turn from a terminal) are found by the reader's next look,
which :func:`overt.channels.events_stream.follow` bounds with a back-off
(:class:`Backoff`): a reader never sleeps longer than its ceiling without
reading the ledger again, and never polls faster than its floor while nothing
is appended.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass

log = logging.getLogger("overt.ledger.notify")


class AppendSignal:
    """The last ``seq`` this process appended, and the readers waiting past it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def seq(self) -> int:
        """The highest ``seq`` notified so far (0: none yet)."""
        return self._seq

    def notify(self, seq: int) -> None:
        """Entries up to ``seq`` are committed: wake every waiter. Any thread."""
        with self._lock:
            if seq > self._seq:
                self._seq = seq
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # its loop closed meanwhile: nobody is waiting there
                log.debug("an append waiter's event loop is closed")

    async def wait(self, after: int, timeout_s: float) -> bool:
        """Wait until an append past ``after`` is notified; false after ``timeout_s``.

        ``after`` is :attr:`seq` as the reader saw it *before* it last read the
        ledger, so an append between that read and this wait is not missed.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._seq > after:
                return True
            future: asyncio.Future[None] = loop.create_future()
            entry = (loop, future)
            self._waiters.append(entry)
        try:
            done, _ = await asyncio.wait({future}, timeout=timeout_s)
        finally:
            if not future.done():
                future.cancel()
                with self._lock:
                    if entry in self._waiters:
                        self._waiters.remove(entry)
        return bool(done)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(slots=True)
class Backoff:
    """How long a follower waits for a signal before it reads the ledger anyway.

    Starts at ``floor_s`` and doubles after each look that found nothing, up to
    ``ceiling_s``; :meth:`reset` once something was found. In-process appends
    wake the follower at once; the back-off only bounds how late another
    process's append is seen (at most ``ceiling_s``).
    """

    floor_s: float = 0.25
    ceiling_s: float = 2.0
    current_s: float = 0.0

    def next(self) -> float:
        """The next wait, in seconds."""
        self.current_s = self.floor_s if self.current_s <= 0 else min(
            self.current_s * 2, self.ceiling_s)
        return self.current_s

    def reset(self) -> None:
        self.current_s = 0.0
