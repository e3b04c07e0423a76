"""What replay reads: the recorded entries of the turns replayed, grouped by turn,
and their bodies, read in bulk (one query per chunk of turns, each body checked
against its digest), and where a turn writes its records: a scratch ledger in
memory (never the ledger read)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from overt.errors import LedgerError
from overt.events import Event
from overt.ledger.base import Entry, Ledger
from overt.ledger.canonical import digest_text
from overt.ledger.chain import body_text
from overt.ledger.reads import replay, sessions
from overt.ledger.reads.base import readable


class Bodies:
    """Content bodies by digest: those stored with a range of entries read at once,
    any other read from the ledger when asked (the parts a session stored earlier)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.held: dict[str, str] = {}

    async def load(self, first_seq: int, last_seq: int) -> None:
        """Read the bodies stored with entries ``first_seq..last_seq`` (kept if each
        hashes to its digest; one that does not is left to :meth:`content`, which
        refuses it)."""
        if not readable(self.ledger):
            return
        self.held.clear()
        for digest, body in await replay.bodies_between(self.ledger, first_seq, last_seq):
            text = body_text(body)
            if text is not None and digest_text(text) == digest:
                self.held[digest] = text

    async def content(self, digest: str, *, seq: int | None = None) -> str | None:
        held = self.held.get(digest)
        if held is not None:
            return held
        text = await self.ledger.content(digest, seq=seq)
        if text is not None:
            self.held[digest] = text
        return text


async def turn_entries(ledger: Ledger, turn_ids: Sequence[str]) -> dict[str, list[Entry]]:
    """The entries of each of ``turn_ids``, in order: one read for them all (through
    the turn index) where the ledger offers plain reads, else one per turn."""
    if not readable(ledger):
        return {t: await ledger.entries(turn_id=t) for t in turn_ids}
    return await replay.turns_entries(ledger, turn_ids)


class ScratchLedger:
    """Where a replayed turn records: in memory, read back only by the engine itself
    (a paused turn's checkpoint). It never touches the ledger replay reads."""

    backend = "scratch"

    def __init__(self) -> None:
        self.contents: dict[str, str] = {}

    async def record(self, events: Sequence[Event], contents: Mapping[str, str] | None = None,
                     *, rows: Any = None) -> list[Entry]:
        if contents:
            self.contents.update(contents)
        return []

    async def content(self, digest: str, *, seq: int | None = None) -> str | None:
        return self.contents.get(digest)

    def clear(self) -> None:
        self.contents.clear()

    async def close(self) -> None:
        self.contents.clear()

    def __getattr__(self, name: str) -> Any:
        raise LedgerError(f"replay's scratch ledger holds only what a replayed turn "
                          f"recorded; it has no {name}")


def scratch() -> tuple[ScratchLedger, Ledger]:
    """A scratch ledger, and the same typed as the engine takes it."""
    ledger = ScratchLedger()
    return ledger, cast(Ledger, ledger)


async def first_turns(ledger: Ledger, session_ids: Sequence[str]) -> dict[str, int]:
    """The seq of each session's first ``turn.started`` (a turn at it has no history)."""
    if not session_ids or not readable(ledger):
        return {}
    return await sessions.first_starts(ledger, session_ids)
