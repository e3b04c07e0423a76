"""How both backends' writer threads take their next group of waiting batches, and
answer the callers once it is committed.

A writer thread waits for one batch, then takes every batch already queued
behind it (up to a limit) so that they share one transaction. ``None`` on the
queue asks the writer to stop once what came before it is written.

Each batch carries its :class:`Caller`. A caller on an event loop waits on a
future of that loop, which the writer settles through the loop itself
(``call_soon_threadsafe``): one wake-up of the loop per group, whatever the
number of batches it answers there, and no :mod:`concurrent.futures` future in
between. A caller without a loop (``record_sync``) blocks on a concurrent
future. Either way the caller hears only after the commit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger("overt.ledger.groups")

P = TypeVar("P")


def next_group(waiting: queue.SimpleQueue[P | None], limit: int) -> tuple[list[P], bool]:
    """The next group to commit, blocking for its first batch, and whether the
    writer should stop after it. An empty group means stop now."""
    first = waiting.get()
    if first is None:
        return [], True
    group = [first]
    while len(group) < limit:
        try:
            more = waiting.get_nowait()
        except queue.Empty:
            break
        if more is None:
            return group, True
        group.append(more)
    return group, False


@dataclass(frozen=True, slots=True)
class Caller:
    """Who waits for a batch: a future of ``loop``, or (``loop`` None) a concurrent
    future that a caller without an event loop blocks on."""

    future: asyncio.Future[Any] | concurrent.futures.Future[Any]
    loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def on_loop(cls) -> Caller:
        """A caller waiting on the running event loop.

        Raises:
            RuntimeError: no event loop is running in this thread.
        """
        loop = asyncio.get_running_loop()
        return cls(loop.create_future(), loop)

    @classmethod
    def blocking(cls) -> Caller:
        """A caller without an event loop, blocked on the future's ``result()``."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        # running from now: nothing can take back a batch the writer may be committing
        future.set_running_or_notify_cancel()
        return cls(future)


Answer = tuple[Caller, bool, Any]
"""(the caller, whether its batch was committed, its result or the exception it fails with)"""


def answer(answers: Iterable[Answer]) -> None:
    """Tell each caller how its batch went (from the writer thread, after the commit).

    Callers on an event loop are answered by one callback per loop. A caller that
    stopped waiting (its task was cancelled) is not answered: what was committed
    stays committed. A loop that closed meanwhile has nobody waiting on it.
    """
    by_loop: dict[asyncio.AbstractEventLoop, list[Answer]] = {}
    for item in answers:
        caller, ok, value = item
        if caller.loop is None:
            if ok:
                caller.future.set_result(value)
            else:
                caller.future.set_exception(value)
        else:
            by_loop.setdefault(caller.loop, []).append(item)
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, items)
        except RuntimeError:  # the loop closed: its callers are gone
            log.debug("a ledger caller's event loop closed before its batch was answered")


def _settle(items: list[Answer]) -> None:
    """On the callers' loop: set each future that is still awaited."""
    for caller, ok, value in items:
        if caller.future.done():
            continue
        if ok:
            caller.future.set_result(value)
        else:
            caller.future.set_exception(value)
