"""Sessions read back from the ledger: who owns one, what it holds, its conversation.

A session is the unit of conversation: the turns recorded under one ``session_id``.
Nothing about it is stored apart from the record: its owner is the actor its first
turn recorded (``turn.started``'s ``actor``), and its history is rebuilt from the
audit entries and the bodies they name in the content tier, so it cannot disagree
with the record.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from overt.errors import LedgerIntegrityError, UsageError
from overt.event_decode import from_entry
from overt.events import TurnStarted
from overt.ledger.canonical import digest_text
from overt.ledger.chain import body_text, entry_data
from overt.ledger.sql import POSTGRES, SQLITE, Dialect
from overt.sessions import queries
from overt.types import Message, ToolCall

LEGACY_OWNER = "operator:default"
"""The owner of a session whose first turn was recorded before turns named their
actor: the operator, who could read every session then."""

ANSWERED = frozenset({"completed", "tool_error_streak", "budget_exceeded"})
"""Turn statuses whose exchange joins the history (a turn the model or the ledger
failed has no answer of the agent's to remember)."""


@runtime_checkable
class SessionLedger(Protocol):
    """What sessions need of a ledger: its backend's name and plain reads (both
    built-in ledgers have them)."""

    backend: str

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session as the record shows it. ``title_digest`` names the first message
    in the content tier (the title is content: shown only to who may read it)."""

    session_id: str
    source: str
    owner: str
    turns: int
    started_at: str
    last_at: str
    title_digest: str | None
    first_seq: int


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    """One answered turn of a session, as the model is shown it again."""

    turn_id: str
    messages: tuple[Message, ...]


def _reader(ledger: object) -> SessionLedger:
    if not isinstance(ledger, SessionLedger):
        raise UsageError(f"{type(ledger).__name__} offers no reads (backend, select): "
                         "sessions cannot be read back from it")
    return ledger


def dialect(ledger: SessionLedger) -> Dialect:
    return SQLITE if ledger.backend == "sqlite" else POSTGRES


def flatten(turns: Sequence[HistoryTurn]) -> list[Message]:
    """The messages of ``turns``, in order (a conversation to show or export)."""
    return [m for turn in turns for m in turn.messages]


def _checked(body: Any, digest: Any, seq: Any) -> str | None:
    """The text of ``body``, which entry ``seq`` says hashes to ``digest``.

    Raises:
        LedgerIntegrityError: it does not: the content tier was changed behind the
            ledger's back, and the model is not given it as the conversation.
    """
    text = body_text(body)
    if text is not None and digest_text(text) != digest:
        raise LedgerIntegrityError(
            f"the content body {digest} that entry {seq} names does not match its digest: "
            "the content tier was changed behind the ledger's back (run overt ledger verify)")
    return text


def _info(row: Sequence[Any], legacy_owner: str) -> SessionInfo:
    first = from_entry(TurnStarted.kind, entry_data(row[5], row[4]), session_id=row[0],
                       expect=TurnStarted)
    return SessionInfo(session_id=row[0], source=first.source,
                       owner=first.actor or legacy_owner, turns=int(row[1]),
                       started_at=row[2], last_at=row[3],
                       title_digest=first.message_digest, first_seq=int(row[4]))


async def session_info(ledger: object, session_id: str, *,
                       legacy_owner: str = LEGACY_OWNER) -> SessionInfo | None:
    """The session ``session_id``, or ``None`` when no turn was recorded under it.

    Raises:
        LedgerError: the ledger could not be read.
    """
    reader = _reader(ledger)
    rows = await reader.select(queries.session(dialect(reader)), (session_id,))
    return _info(rows[0], legacy_owner) if rows else None


async def list_sessions(ledger: object, *, owner: str | None = None,
                        source: str | None = None, since: str | None = None,
                        until: str | None = None, text: str | None = None,
                        limit: int = 50,
                        legacy_owner: str = LEGACY_OWNER) -> list[SessionInfo]:
    """Sessions, the most recently active first, at most ``limit``; when given, only
    ``owner``'s, ``source``'s, those active at or after ``since``, those started
    before ``until`` (ISO times or dates), and those with a message or an answer
    containing ``text`` (case aside). The text is searched by the database in the
    content tier: a caller must show only what its reader may read (a match says
    something of a body).

    A NUL in ``text`` is left out of it (PostgreSQL's text cannot hold one, and a
    body's NUL bytes are left out of what it searches); a filter holding NUL names
    nothing on the record, so nothing is listed.

    Raises:
        LedgerError: the ledger could not be read.
    """
    if any("\x00" in v for v in (owner, source, since, until, legacy_owner) if v):
        return []
    if text is not None:
        text = text.replace("\x00", "")
    params: list[Any] = []
    if owner is not None:
        params += [legacy_owner, owner]
    for value in (source, since, until, text):
        if value is not None:
            params.append(value)
    params.append(int(limit))
    reader = _reader(ledger)
    statement = queries.sessions(dialect(reader), by_owner=owner is not None,
                                 by_source=source is not None, since=since is not None,
                                 until=until is not None, text=text is not None)
    return [_info(row, legacy_owner) for row in await reader.select(statement, tuple(params))]


Row = tuple[Any, ...]
"""One conversation entry as :func:`overt.sessions.queries.conversation` reads it."""


async def session_history(ledger: object, session_id: str, *,
                          before_turn: str | None = None) -> list[HistoryTurn]:
    """The answered turns of ``session_id``, oldest first, each as the messages the
    model saw and said: the user's message, each tool call with its result, the
    answer. Turns not answered yet (in progress, paused for approval) and turns that
    failed are left out; so is ``before_turn`` and every turn started after it.

    Reads the whole conversation; :class:`HistoryReader` reads only what is new.

    Raises:
        LedgerError: the ledger could not be read, or an entry is malformed.
        UsageError: ``ledger`` has no plain reads (a ledger of a third party's
            that does not offer ``select``): no history can be rebuilt from it.
    """
    reader = _reader(ledger)
    rows = await reader.select(queries.conversation(dialect(reader)), (session_id, -1))
    return fold(rows, before_turn=before_turn)


def fold(rows: Sequence[Row], *, before_turn: str | None = None) -> list[HistoryTurn]:
    """The answered turns that conversation ``rows`` record (see :func:`session_history`)."""
    conversation = _Conversation()
    conversation.add(rows, before_turn=before_turn)
    return conversation.turns()


class _Conversation:
    """Conversation entries folded into turns, one entry at a time (so more can follow)."""

    def __init__(self) -> None:
        self.messages: dict[str, list[Message]] = {}
        self.answered: dict[str, HistoryTurn] = {}

    def add(self, rows: Sequence[Row], *, before_turn: str | None = None) -> None:
        for seq, kind, turn_id, status, call_id, name, body, args_body, digest, args_digest \
                in rows:
            if turn_id is None:
                continue
            if turn_id == before_turn:
                break
            text = _checked(body, digest, seq)
            if kind == "turn.started":
                self.messages.setdefault(turn_id,
                                         [Message("user", text if text is not None else "")])
                continue
            messages = self.messages.get(turn_id)
            if messages is None:  # the turn started before a prune: its beginning is gone
                continue
            if kind == "tool_call.completed":
                call = ToolCall(call_id or "", name or "",
                                _arguments(_checked(args_body, args_digest, seq)))
                messages.append(Message("assistant", "", (call,)))
                messages.append(Message(
                    "tool", text if text is not None else "(result not stored)",
                    tool_call_id=call.id, name=call.name, is_error=status != "ok"))
            elif kind == "turn.completed":
                messages.append(Message("assistant", text or ""))
                if status in ANSWERED and text is not None:
                    self.answered[turn_id] = HistoryTurn(turn_id, tuple(messages))

    def turns(self) -> list[HistoryTurn]:
        """The answered turns, in the order they started."""
        return [self.answered[t] for t in self.messages if t in self.answered]


@dataclass(slots=True)
class _Read:
    conversation: _Conversation
    count: int
    head: int


class HistoryReader:
    """Session histories for a long-running process: each session's conversation
    entries are kept after they are read, and each later read asks the ledger only
    how many there are now and reads only those past the newest it has.

    The ledger stays the only store: every read is checked against it first (the
    entries' count and newest ``seq``), so entries appended by any process are seen,
    and a prune, which removes entries, makes the next read a whole one. At most
    ``size`` sessions are kept, the least recently read dropped first.
    """

    def __init__(self, ledger: object, *, size: int = 256) -> None:
        self._ledger = _reader(ledger)
        self._d = dialect(self._ledger)
        self._size = size
        self._kept: OrderedDict[str, _Read] = OrderedDict()

    async def history(self, session_id: str) -> list[HistoryTurn]:
        """As :func:`session_history`.

        Raises:
            LedgerError: the ledger could not be read, or an entry is malformed.
        """
        count, head = (await self._ledger.select(queries.conversation_head(self._d),
                                                 (session_id,)))[0]
        count, head = int(count), int(head if head is not None else -1)
        kept = self._kept.pop(session_id, None)
        if kept is None or kept.count != count or kept.head != head:
            after = kept.head if kept is not None and count > kept.count else -1
            new = await self._ledger.select(queries.conversation(self._d), (session_id, after))
            if kept is not None and after >= 0 and kept.count + len(new) == count:
                kept.conversation.add(new)
                kept.count, kept.head = count, int(new[-1][0]) if new else kept.head
            else:  # new, or entries left since it was read (a prune): read it all
                rows = new if after < 0 else await self._ledger.select(
                    queries.conversation(self._d), (session_id, -1))
                kept = _Read(_Conversation(), len(rows), int(rows[-1][0]) if rows else -1)
                kept.conversation.add(rows)
        self._kept[session_id] = kept
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return kept.conversation.turns()


def _arguments(body: str | None) -> dict[str, Any]:
    """A tool call's stored arguments (``{}`` when pruned or not an object: the call
    is still shown, with what is left of it)."""
    try:
        value = json.loads(body) if body else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def title(ledger: Any, info: SessionInfo, *, width: int = 60) -> str:
    """The session's title: its first message, on one line, cut to ``width``."""
    if info.title_digest is None:
        return ""
    body = await ledger.content(info.title_digest, seq=info.first_seq)
    if body is None:
        return "(pruned)"
    line = " ".join(body.split())
    return line if len(line) <= width else line[: width - 1] + "…"
