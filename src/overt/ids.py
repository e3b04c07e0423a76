"""ULIDs: 48-bit millisecond time + 80 random bits, Crockford base32, 26 characters.

Written here rather than taken from a package: it is a few lines, and it sits
on the hot path of every record (a turn takes about twenty).

Monotonic, as the ULID spec's monotonic mode: within one process, each ULID
sorts after the one before. The first ULID of a millisecond draws 80 fresh
random bits; the next ones in the same millisecond add one to them, so a
turn's ids sort in the order they were made, not by chance, and only one in
many asks the OS for randomness. If the clock steps back, ids keep counting
from the last millisecond issued until it catches up. A forked child starts a
sequence of its own (it would otherwise repeat its parent's next ids).

Not secrets: the next ULID of a millisecond is the last one plus one. Nothing
in overt uses one as a credential (bearer tokens come from :mod:`secrets`).
"""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two characters for each 10-bit value: a ULID is encoded in 13 lookups.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
_RANDOM_MAX = (1 << 80) - 1


class _Sequence:
    """The last ULID issued in this process: its millisecond, random part and
    encoded time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ms = -1
        self.random = 0
        self.head = ""
        self.fork_safe = False

    def reset(self) -> None:
        self.lock = threading.Lock()  # a lock held in the parent at fork time stays held
        self.ms = -1

    def next(self, ms: int) -> tuple[str, int]:
        with self.lock:
            if not self.fork_safe:
                os.register_at_fork(after_in_child=self.reset)
                self.fork_safe = True
            if ms <= self.ms and self.random < _RANDOM_MAX:
                self.random += 1
            else:
                self.ms = max(ms, self.ms + 1)
                self.random = int.from_bytes(os.urandom(10), "big")
                self.head = _time_part(self.ms)
            return self.head, self.random


_SEQUENCE = _Sequence()


def _time_part(ms: int) -> str:
    p = _PAIRS
    return (p[(ms >> 40) & 1023] + p[(ms >> 30) & 1023] + p[(ms >> 20) & 1023]
            + p[(ms >> 10) & 1023] + p[ms & 1023])


def new_ulid(now_ms: int | None = None) -> str:
    """A new ULID string, after every one this process made before it.

    With ``now_ms`` (a fixed time, for tests and imports of old records): that
    time and fresh random bits, outside the sequence.
    """
    if now_ms is None:
        head, r = _SEQUENCE.next(time.time_ns() // 1_000_000)
    else:
        head, r = _time_part(now_ms), int.from_bytes(os.urandom(10), "big")
    p = _PAIRS
    return (
        head + p[r >> 70] + p[(r >> 60) & 1023] + p[(r >> 50) & 1023] + p[(r >> 40) & 1023]
        + p[(r >> 30) & 1023] + p[(r >> 20) & 1023] + p[(r >> 10) & 1023] + p[r & 1023]
    )
