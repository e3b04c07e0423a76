"""How both backends' writer threads take their next group of waiting batches.

A writer thread waits for one batch, then takes every batch already queued
behind it (up to a limit) so that they share one transaction. ``None`` on the
queue asks the writer to stop once what came before it is written.
"""

from __future__ import annotations

import queue
from typing import TypeVar

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
