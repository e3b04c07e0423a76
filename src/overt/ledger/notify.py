"""A signal that this process appended to the ledger, for readers that follow it.

A reader that follows the ledger (an SSE stream, a request waiting for a paused
turn's answer) waits on :meth:`AppendSignal.wait` instead of polling: each
backend calls :meth:`AppendSignal.notify` with the last ``seq`` it committed
and the turns it appended to, from the writer thread that committed it, and the waiters it concerns,
on whichever event loop, wake.

It sees this process's appends only. Another process's (``overt approvals
approve`` resuming a turn from a terminal, another ``overt serve`` worker on the
same PostgreSQL) are found by the reader's next look, which the reader bounds
with a back-off (:class:`Backoff`): it never sleeps longer than the ceiling
without reading the ledger again, and never reads faster than the floor while
nothing is appended. (PostgreSQL's LISTEN/NOTIFY would carry other processes'
appends too, at the cost of a statement in every group commit and a connection
held per process; the back-off's two seconds were judged enough for a stream.)
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

log = logging.getLogger("overt.ledger.notify")

TURNS_KEPT = 4096
"""How many turns' last appends a signal remembers (a waiter for an older turn is
woken by its next look instead)."""


class AppendSignal:
    """The last ``seq`` this process appended, per turn too, and the readers waiting
    past it. A reader that follows one turn is woken by that turn's appends only,
    so a hundred open streams are not all read again for every append."""

    def __init__(self, *, turns_kept: int = TURNS_KEPT) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._turns: OrderedDict[str, int] = OrderedDict()
        self._turns_kept = turns_kept
        self._waiters: list[_Waiter] = []

    @property
    def seq(self) -> int:
        """The highest ``seq`` notified so far (0: none yet)."""
        return self._seq

    def notify(self, seq: int, turn_ids: Iterable[str | None] = ()) -> None:
        """Entries up to ``seq`` are committed, of the turns ``turn_ids``: wake the
        waiters for any append and those for one of these turns. Any thread."""
        turns = {t for t in turn_ids if t}
        with self._lock:
            if seq > self._seq:
                self._seq = seq
            for turn in turns:
                self._turns[turn] = max(seq, self._turns.pop(turn, 0))
            while len(self._turns) > self._turns_kept:
                self._turns.popitem(last=False)
            woken = [w for w in self._waiters if w.turn_id is None or w.turn_id in turns]
            self._waiters = [w for w in self._waiters if w not in woken]
        for waiter in woken:
            try:
                waiter.loop.call_soon_threadsafe(_wake, waiter.future)
            except RuntimeError:  # its loop closed meanwhile: nobody is waiting there
                log.debug("an append waiter's event loop is closed")

    async def wait(self, after: int, timeout_s: float, *, turn_id: str | None = None) -> bool:
        """Wait until an append past ``after`` is notified (of turn ``turn_id``, when
        given); false after ``timeout_s``.

        ``after`` is :attr:`seq` as the reader saw it *before* it last read the
        ledger, so an append between that read and this wait is not missed (for
        a turn, as long as it is among the last :data:`TURNS_KEPT` turns appended
        to; an older one is found by the reader's next look).
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            last = self._seq if turn_id is None else self._turns.get(turn_id, 0)
            if last > after:
                return True
            waiter = _Waiter(loop, loop.create_future(), turn_id)
            self._waiters.append(waiter)
        try:
            done, _ = await asyncio.wait({waiter.future}, timeout=timeout_s)
        finally:
            if not waiter.future.done():
                waiter.future.cancel()
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
        return bool(done)


@dataclass(eq=False, slots=True)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    turn_id: str | None


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
