"""ULIDs: 48-bit millisecond time + 80 random bits, Crockford base32, 26 characters.

Written here rather than taken from a package: it is a few lines, and it sits
on the hot path of every record.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Two characters for each 10-bit value: a ULID is encoded in 13 lookups.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]


def new_ulid(now_ms: int | None = None) -> str:
    """A new ULID string; sortable by creation time to the millisecond."""
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    r = int.from_bytes(os.urandom(10), "big")
    p = _PAIRS
    return (
        p[(ms >> 40) & 1023] + p[(ms >> 30) & 1023] + p[(ms >> 20) & 1023]
        + p[(ms >> 10) & 1023] + p[ms & 1023]
        + p[r >> 70] + p[(r >> 60) & 1023] + p[(r >> 50) & 1023] + p[(r >> 40) & 1023]
        + p[(r >> 30) & 1023] + p[(r >> 20) & 1023] + p[(r >> 10) & 1023] + p[r & 1023]
    )

