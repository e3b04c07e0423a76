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

from overt.errors import UsageError

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


MAX_ID_CHARS = 1024
"""The longest id overt reads from a caller: a session id is chosen by the channel
(an email's Message-ID, a client's own session id), and a real one is far shorter."""

MAX_TOKEN_CHARS = 64
_TOKEN_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-")


def id_problem(value: object, *, token: bool = False, typed: bool = True) -> str | None:
    """Why ``value`` cannot be an id, or ``None``.

    An id is non-empty text that both ledgers can store: valid UTF-8 (no lone
    surrogate, which is what bytes that are not UTF-8 become on a command line) and
    no NUL (PostgreSQL's text cannot hold one). ``typed`` (an id a person gave, on the
    command line): also at most :data:`MAX_ID_CHARS` characters and no control
    characters; a channel's own ids (an email's Message-ID) are held only to what
    storing them needs. ``token``: the form of the ids overt makes itself (turn,
    approval request and memory node ids, written as ULIDs): letters, digits, ``_``
    and ``-``, at most :data:`MAX_TOKEN_CHARS`.
    """
    if not isinstance(value, str):
        return f"an id is text, not {type(value).__name__}"
    if not value:
        return "an id cannot be empty"
    if typed and len(value) > MAX_ID_CHARS:
        return f"an id is at most {MAX_ID_CHARS} characters, this one has {len(value)}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = value[exc.start]
        byte = f" (the byte 0x{ord(char) - 0xDC00:02x})" if char >= "\udc80" else ""
        return f"an id is valid UTF-8 text; character {exc.start} is not{byte}"
    if "\x00" in value:
        return f"an id holds no NUL character; character {value.index(chr(0))} is one"
    if typed:
        for at, char in enumerate(value):
            if char < " " or "\x7f" <= char < "\xa0":
                return f"an id has no control characters; character {at} is U+{ord(char):04X}"
    if token and (len(value) > MAX_TOKEN_CHARS or not set(value) <= _TOKEN_CHARS):
        return (f"letters, digits, _ and - only, at most {MAX_TOKEN_CHARS} (overt writes "
                "these ids as ULIDs: 26 letters and digits)")
    return None


def checked_id(value: object, what: str, *, token: bool = False, typed: bool = True) -> str:
    """``value``, checked as the id of ``what`` (``"session"``, ``"turn"``...).

    Raises:
        UsageError: it cannot be an id (:func:`id_problem`), named with ``what``.
    """
    problem = id_problem(value, token=token, typed=typed)
    if problem is not None:
        shown = ascii(value[:60]) + ("..." if len(value) > 60 else "") \
            if isinstance(value, str) else type(value).__name__
        raise UsageError(f"bad {what} id {shown}: {problem}")
    assert isinstance(value, str)
    return value
