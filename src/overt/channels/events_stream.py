"""A turn's events as Server-Sent Events, read from the ledger, pushed as it appends.

Each event is an audit entry (ids, kinds, statuses: never content) whose
``id:`` is its ledger ``seq``. A client that reconnects sends the last id it
read as ``Last-Event-ID`` and the stream resumes after it: nothing is sent
twice, nothing is skipped.

The stream reads the turn's entries, sends the new ones, then waits for the
ledger to append to the turn (:class:`overt.ledger.notify.AppendSignal`: this
process's appends to it wake it at once; appends to other turns do not).
Another process's appends (a turn paused here and resumed by ``overt approvals
approve`` elsewhere) are found by the next read, at most
:attr:`~overt.ledger.notify.Backoff.ceiling_s` later: the wait backs off from its
floor to that ceiling while nothing arrives, so an idle stream reads the ledger
about once every two seconds, not ten times a second.

A stream ends after ``turn.completed`` (at once, when the turn had completed
before the stream started), with ``follow=False`` after what is recorded, and
in any case after ``lifetime_s``: the client reconnects with ``Last-Event-ID``
to go on. A ledger that cannot be read (PostgreSQL restarting) ends the stream
the same way, with a comment saying so, rather than breaking the connection.
A comment line is sent when nothing was for ``keepalive_s``, so proxies do not
close an idle connection.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable

from overt.errors import LedgerError
from overt.ledger.base import Entry, Ledger
from overt.ledger.notify import Backoff

log = logging.getLogger("overt.channels.events_stream")

DEFAULT_LIFETIME_S = 900.0
"""How long one stream lives at most (the client reconnects with Last-Event-ID)."""
KEEPALIVE_S = 15.0
RETRY_MS = 1000
"""What the stream asks a client to wait before it reconnects (the SSE ``retry:`` field)."""


def sse(entry: Entry) -> str:
    """One entry as an SSE event."""
    payload = {"seq": entry.seq, "id": entry.id, "kind": entry.kind, "at": entry.at,
               "turn_id": entry.turn_id, "session_id": entry.session_id, "data": entry.data}
    return f"id: {entry.seq}\nevent: {entry.kind}\ndata: " \
           f"{json.dumps(payload, separators=(',', ':'))}\n\n"


def last_event_id(header: str | None) -> int:
    """The ``seq`` a ``Last-Event-ID`` header names (0 without one).

    Raises:
        ValueError: the header is not a non-negative integer (an id this stream gave).
    """
    if header is None or not header.strip():
        return 0
    text = header.strip()
    if not (text.isascii() and text.isdigit()):  # int() also reads "-1", " ٣", "1_0"
        raise ValueError(f"a Last-Event-ID is a ledger seq (digits 0-9), not {text[:40]!r}")
    return int(text)


async def turn_events(ledger: Ledger, turn_id: str, *, follow: bool = True,
                      after_seq: int = 0, lifetime_s: float = DEFAULT_LIFETIME_S,
                      keepalive_s: float = KEEPALIVE_S, backoff: Backoff | None = None,
                      clock: Callable[[], float] = time.monotonic) -> AsyncIterator[str]:
    """The turn's entries after ``after_seq`` as SSE text, oldest first, until the
    turn completes (see the module docstring for when else it ends)."""
    last = after_seq
    wait = backoff or Backoff()
    started = quiet_since = clock()
    yield f"retry: {RETRY_MS}\n\n"
    while True:
        seen = ledger.appended.seq  # before the read: an append after it wakes the wait
        try:
            entries = await ledger.entries(turn_id=turn_id)
        except LedgerError as exc:  # the database went away (a restart): the client
            log.warning("stream of turn %s ended: %s", turn_id, exc)  # comes back
            yield ": the ledger cannot be read now: reconnect with Last-Event-ID\n\n"
            return
        completed = False
        for entry in entries:
            completed = completed or entry.kind == "turn.completed"
            if entry.seq > last:
                last = entry.seq
                yield sse(entry)
                wait.reset()
                quiet_since = clock()
        if completed or not follow:
            return
        left = lifetime_s - (clock() - started)
        if left <= 0:
            yield ": this stream's lifetime is over: reconnect with Last-Event-ID\n\n"
            return
        if not await ledger.appended.wait(seen, min(wait.next(), left), turn_id=turn_id) \
                and clock() - quiet_since >= keepalive_s:
            quiet_since = clock()
            yield ": keep-alive\n\n"
