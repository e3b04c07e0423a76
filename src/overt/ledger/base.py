"""The Ledger protocol and the values it reads and writes.

A ledger has two tiers. The audit tier is one hash-chained, append-only
sequence of :class:`Entry` (identifiers, statuses, numbers, digests). The
content tier holds bodies (message text, tool arguments and results) keyed by
their digest, in tables named ``content_*``. The engine writes both in one
transaction through :meth:`Ledger.record`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar, overload

from overt.events import AnyEvent, Event, LedgerPruned, from_entry
from overt.ledger.notify import AppendSignal

E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class Entry:
    """One audit entry as stored (see :mod:`overt.ledger.canonical` for the contract)."""

    seq: int
    id: str
    kind: str
    at: str
    turn_id: str | None
    session_id: str | None
    data: dict[str, Any]
    prev_hash: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "id": self.id, "kind": self.kind, "at": self.at,
            "turn_id": self.turn_id, "session_id": self.session_id, "data": self.data,
            "prev_hash": self.prev_hash, "hash": self.hash,
        }

    @overload
    def event(self) -> AnyEvent: ...

    @overload
    def event(self, expect: type[E]) -> E: ...

    def event(self, expect: type[Event] | None = None) -> Event:
        """The typed event this entry recorded; ``expect``: the class the caller reads.

        Raises:
            EventDecodeError: no event class has this kind, it is not ``expect``'s,
                or the entry lacks a field the class requires.
        """
        return from_entry(self.kind, self.data, turn_id=self.turn_id,
                          session_id=self.session_id, expect=expect)


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``verify`` found. ``ok`` is false when an entry does not match."""

    ok: bool
    entries: int
    first_seq: int | None = None
    last_seq: int | None = None
    head_hash: str | None = None
    bad_seq: int | None = None
    problem: str | None = None
    content_checked: int = 0
    content_bad: list[str] = field(default_factory=list)
    index_bad: bool = False
    """The chain verified, but what the backend derives from it (the trail
    index) does not match it: ``bad_seq`` is the entry it misrepresents, if one."""
    memory_bad: bool = False
    """The chain verified, but the memory tables beside it disagree with the entries
    recording them (:mod:`overt.ledger.memory_check`): ``bad_seq`` is the entry a
    row contradicts, if one."""


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """One line of ``overt runs``."""

    turn_id: str
    session_id: str | None
    at: str
    source: str
    model: str
    status: str | None
    tools_used: list[str] | None
    duration_ms: float | None


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Tokens and money per route, model, UTC day and/or session over a period
    (``*``: not grouped)."""

    route: str
    model: str
    inferences: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    day: str = "*"
    session: str = "*"


class TrailRows(NamedTuple):
    """The entries of a reasoning trail, as the trail index holds them, in three
    groups, each in ``seq`` order and each row a plain tuple of only its kind's
    fields, as the database returns it (a trail is read 80,000 rows at a time):
    see :mod:`overt.ledger.trail_read` for the columns of each."""

    turns: list[tuple[Any, ...]]
    """Turns (their ``turn.started``), with the message
    (:data:`~overt.ledger.trail_read.TURN_COLUMNS`)."""
    steps: list[tuple[Any, ...]]
    """Reasoning steps, with their text (:data:`~overt.ledger.trail_read.STEP_COLUMNS`)."""
    events: list[tuple[Any, ...]]
    """Every other kind a trail reads (:data:`~overt.ledger.trail_read.EVENT_COLUMNS`)."""


TableRow = tuple[str, Mapping[str, Any]]
"""(table, {column: value}): a row written beside the chain in the same transaction."""


class Ledger(Protocol):
    """Where every turn is recorded. Async; each backend is one implementation."""

    appended: AppendSignal
    """Signalled after each append of this process (:mod:`overt.ledger.notify`)."""

    async def record(self, events: Sequence[Event],
                     contents: Mapping[str, str] | None = None, *,
                     rows: Sequence[TableRow] = ()) -> list[Entry]:
        """Append ``events`` to the chain, ``contents`` (digest -> body) to the
        content tier and ``rows`` to their tables, in one transaction. Returns
        the stored entries.

        An event with a ``claim`` field is once-only: if an entry of the same
        kind and claim is on the record (or earlier in the batch), nothing is
        written and :class:`LedgerConflict` is raised.

        Raises:
            LedgerConflict: a claim is taken; nothing was written.
            LedgerError: nothing was written.
        """
        ...

    async def claimed(self, kind: str, claim: str) -> Entry | None:
        """The once-only entry of ``kind`` holding ``claim``, if there is one."""
        ...

    async def entries(self, *, turn_id: str | None = None, session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None, limit: int | None = None) -> list[Entry]:
        """Entries matching every given filter, in ``seq`` order."""
        ...

    async def trail_rows(self, *, turn_id: str | None = None,
                         session_id: str | None = None, since: str | None = None,
                         until: str | None = None) -> TrailRows:
        """The entries of the turns in scope of the kinds a trail reads
        (:data:`~overt.ledger.trail_index.TRAIL_KINDS`), read in one snapshot.

        In scope: the turn ``turn_id``; else the turns of ``session_id`` and/or
        started in ``[since, until)``.
        """
        ...

    async def content(self, digest: str, *, seq: int | None = None) -> str | None:
        """The body stored under ``digest``, or ``None`` (never stored, or pruned).

        ``seq``, the entry that references the body, makes the lookup a short
        walk back through the content stored with it; without it the whole
        content tier may be scanned. A row whose body does not hash to ``digest``
        (changed, or inserted, behind the ledger's back) is never returned
        (:func:`overt.ledger.chain.checked_body`).

        Raises:
            LedgerIntegrityError: bodies are stored under ``digest``, none matches it.
        """
        ...

    async def recent_turns(self, limit: int = 20) -> list[TurnSummary]:
        """The latest turns, newest first."""
        ...

    async def usage(self, since: str | None = None, until: str | None = None,
                    by: Sequence[str] = ("route", "model")) -> list[UsageRow]:
        """Tokens and cost of inferences in ``[since, until)`` grouped ``by`` route, model,
        day and/or session."""
        ...

    async def spent(self, *, since: str, session_id: str | None = None) -> tuple[int, float]:
        """Tokens (input + output) and dollars of inferences since ``since`` (of one session)."""
        ...

    async def count(self, kind: str, since: str | None = None) -> int:
        """How many entries of ``kind`` there are (since ``since``)."""
        ...

    async def reply_failures(self, reply_claim: str) -> int:
        """How many ``channel.reply_failed`` entries name ``reply_claim`` (read through
        an index of those alone: as many rows as that reply failed)."""
        ...

    async def direct_calls(self, tool_call_ids: Sequence[str]) -> list[Entry]:
        """The ``tool_call.started`` and ``tool_call.completed`` entries outside any turn
        of the calls ``tool_call_ids``, in ``seq`` order (read through an index of
        calls outside a turn: as many rows as those calls wrote)."""
        ...

    async def unresumed_replies(self) -> list[Entry]:
        """The ``channel.replied`` entries that said their turn awaits an approval
        (``awaiting_approval``) and whose resumed reply, the ``channel.replied``
        claimed ``{claim}:resumed:{awaiting_approval}``, is not on the record, in
        ``seq`` order (read through an index of those replies alone)."""
        ...

    async def last_error(self) -> Entry | None:
        """The newest entry that records a failure: a turn that did not complete,
        a tool call whose status is not ``ok``, or an inference that failed."""
        ...

    async def prune(self, cutoff: str) -> LedgerPruned:
        """Remove entries and content older than ``cutoff`` (see :mod:`.retention`);
        the returned record is also appended to the chain."""
        ...

    async def verify(self, *, check_content: bool = True, check_index: bool = True,
                     check_bodies: bool = True,
                     progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Recompute the whole chain; name the first entry that does not match.

        ``check_content``: then every body against its digest, and (``check_bodies``)
        that every body an entry points to is stored, or may have gone with a
        recorded prune (a deleted body fails). ``check_index``: then what the
        backend keeps derived from the chain (the trail index), and the memory
        tables beside it, against the chain. Each costs about as much again as
        the chain.
        ``progress``: called with (rows checked, rows to check in all) about a
        hundred times as the verify reads, and with (total, total) when it passes
        (:class:`overt.ledger.chain.Counted`), on the thread it reads on.
        """
        ...

    def migrate(self) -> list[int]:
        """Apply pending schema migrations; the versions applied (idempotent)."""
        ...

    def schema_versions(self) -> list[int]:
        """The migration versions applied to this ledger."""
        ...

    async def close(self) -> None:
        """Release connections. Safe to call twice."""
        ...
