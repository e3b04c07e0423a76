"""A turn's events as Server-Sent Events, read from the ledger.

The stream polls the ledger for the turn's entries after the last one sent:
simple, and correct whichever process records the turn (a turn paused here and
resumed by ``overt approvals approve`` elsewhere streams on). Each event is an
audit entry (ids, kinds, statuses: never content), ``id:`` its ledger ``seq``.
The stream ends after ``turn.completed``; with ``follow=False`` it ends at once
after what is recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from overt.ledger.base import Entry, Ledger


def sse(entry: Entry) -> str:
    """One entry as an SSE event."""
    payload = {"seq": entry.seq, "id": entry.id, "kind": entry.kind, "at": entry.at,
               "turn_id": entry.turn_id, "session_id": entry.session_id, "data": entry.data}
    return f"id: {entry.seq}\nevent: {entry.kind}\ndata: " \
           f"{json.dumps(payload, separators=(',', ':'))}\n\n"


async def turn_events(ledger: Ledger, turn_id: str, *, follow: bool = True,
                      poll_s: float = 0.2, after_seq: int = 0) -> AsyncIterator[str]:
    """The turn's entries as SSE text, oldest first, until the turn completes."""
    last = after_seq
    while True:
        entries = [e for e in await ledger.entries(turn_id=turn_id) if e.seq > last]
        for entry in entries:
            last = entry.seq
            yield sse(entry)
            if entry.kind == "turn.completed":
                return
        if not follow:
            return
        if not entries:
            yield ": keep-alive\n\n"
        await asyncio.sleep(poll_s)
