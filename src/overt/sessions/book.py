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
from typing import Any

from overt.errors import LedgerIntegrityError
from overt.events import TurnStarted
from overt.ledger.canonical import digest_text
from overt.ledger.chain import body_text
from overt.ledger.reads import conversations, sessions
from overt.ledger.reads.base import selecting
from overt.ledger.reads.conversations import ConversationEntry
from overt.ledger.reads.sessions import SessionSummary
from overt.sessions.window import Counter, EarlierTurns, HistoryTurn, estimate_tokens, turn_tokens
from overt.types import Message, ToolCall

ANSWERED = frozenset({"completed", "tool_error_streak", "budget_exceeded"})
"""Turn statuses whose exchange joins the history (a turn the model or the ledger
failed has no answer of the agent's to remember)."""


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


def _info(summary: SessionSummary) -> SessionInfo:
    first = summary.first
    return SessionInfo(session_id=summary.session_id, source=first.source,
                       owner=first.actor, turns=summary.turns,
                       started_at=summary.started_at, last_at=summary.last_at,
                       title_digest=first.message_digest, first_seq=summary.first_seq)


async def session_info(ledger: object, session_id: str) -> SessionInfo | None:
    """The session ``session_id``, or ``None`` when no turn was recorded under it.

    Raises:
        LedgerError: the ledger could not be read.
    """
    summary = await sessions.session_summary(ledger, session_id)
    return _info(summary) if summary is not None else None


async def session_owner(ledger: object, session_id: str) -> str | None:
    """The owner of ``session_id`` (as :func:`session_info` gives it), or ``None`` when
    no turn was recorded under it: one entry read, however long the session is.

    Raises:
        LedgerError: the ledger could not be read.
    """
    first = await sessions.session_opening(ledger, session_id)
    return None if first is None else first.actor


async def list_sessions(ledger: object, *, owner: str | None = None,
                        source: str | None = None, since: str | None = None,
                        until: str | None = None, text: str | None = None,
                        limit: int = 50) -> list[SessionInfo]:
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
    if any("\x00" in v for v in (owner, source, since, until) if v):
        return []
    if text is not None:
        text = text.replace("\x00", "")
    found = await sessions.session_summaries(ledger, owner=owner, source=source,
                                             since=since, until=until, text=text,
                                             limit=limit)
    return [_info(summary) for summary in found]


Row = ConversationEntry
"""One conversation entry as :func:`overt.ledger.reads.conversations.conversation`
reads it."""


async def session_history(ledger: object, session_id: str, *,
                          before_turn: str | None = None) -> list[HistoryTurn]:
    """The answered turns of ``session_id``, oldest first, each as the messages the
    model saw and said: the user's message, each tool call with its result, the
    answer. A turn paused for an approval is there as far as it went, then a note
    that it waits (or how its request was decided: :func:`waiting_note`), until it
    is answered. Turns in progress and turns that failed are left out; so is
    ``before_turn`` and every turn started after it.

    Reads the whole conversation; :class:`HistoryReader` reads only what is new.

    Raises:
        LedgerError: the ledger could not be read, or an entry is malformed.
        UsageError: ``ledger`` has no plain reads (a ledger of a third party's
            that does not offer ``select``): no history can be rebuilt from it.
    """
    return fold(await conversations.conversation(ledger, session_id),
                before_turn=before_turn)


def fold(rows: Sequence[Row], *, before_turn: str | None = None) -> list[HistoryTurn]:
    """The answered turns that conversation ``rows`` record (see :func:`session_history`)."""
    conversation = _Conversation()
    conversation.add(rows, before_turn=before_turn)
    return conversation.turns()


def waiting_note(tool_name: str, request_id: str, decision: str | None = None) -> str:
    """What a turn paused for an approval says in its session's history until it is
    answered: that the request waits (or how it was decided), in the agent's words."""
    if decision is None:
        return (f"(This request is waiting for an operator's approval before I run "
                f"{tool_name}: approval request {request_id}. {tool_name} has not run; "
                "the answer follows once the request is decided.)")
    if decision == "approved":
        return (f"(An operator approved approval request {request_id}: {tool_name} runs "
                "now, and the answer follows.)")
    if decision == "denied":
        return (f"(An operator denied approval request {request_id}: {tool_name} will not "
                "run; the answer follows.)")
    return (f"(Approval request {request_id} {decision}: {tool_name} will not run; the "
            "answer follows.)")


@dataclass(frozen=True, slots=True)
class _Held:
    """A paused turn's held call: what its history says until the turn is answered."""

    turn: HistoryTurn
    tool_call_id: str
    tool_name: str
    request_id: str


class _Conversation:
    """Conversation entries folded into turns, one entry at a time (so more can follow).

    A turn paused for an approval is in the conversation (as far as it went, and a
    note that it waits: :func:`waiting_note`) until its answer replaces it, so a
    follow-up message is answered knowing of the request that waits.
    """

    def __init__(self) -> None:
        self.messages: dict[str, list[Message]] = {}
        self.answered: dict[str, HistoryTurn] = {}
        self.held: dict[str, _Held] = {}
        self._earlier: EarlierTurns | None = None
        """The answered turns in order (:meth:`earlier`), kept as each newest turn is
        answered; ``None``: made again when next asked for."""

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
            if kind == "turn.paused":
                self.held[turn_id] = _Held(
                    HistoryTurn(turn_id, (*messages, Message(
                        "assistant", waiting_note(name or "", status or "")))),
                    call_id or "", name or "", status or "")
            elif kind == "approval.decided":
                held = self.held.get(turn_id)
                if held is not None and held.tool_call_id == call_id:
                    note = waiting_note(held.tool_name, held.request_id, status or "")
                    self.held[turn_id] = _Held(
                        HistoryTurn(turn_id, (*held.turn.messages[:-1],
                                              Message("assistant", note))),
                        held.tool_call_id, held.tool_name, held.request_id)
            elif kind == "tool_call.completed":
                call = ToolCall(call_id or "", name or "",
                                _arguments(_checked(args_body, args_digest, seq)))
                messages.append(Message("assistant", "", (call,)))
                messages.append(Message(
                    "tool", text if text is not None else "(result not stored)",
                    tool_call_id=call.id, name=call.name, is_error=status != "ok"))
            elif kind == "turn.completed":
                self.held.pop(turn_id, None)
                messages.append(Message("assistant", text or ""))
                if status in ANSWERED and text is not None:
                    self._answer(HistoryTurn(turn_id, tuple(messages)))

    def _answer(self, turn: HistoryTurn) -> None:
        earlier = self._earlier
        if earlier is not None:
            if turn.turn_id not in self.answered and next(reversed(self.messages)) == turn.turn_id:
                earlier.append(turn)  # the newest turn started: it goes last
            else:
                self._earlier = None
        self.answered[turn.turn_id] = turn

    def earlier(self) -> EarlierTurns:
        """:meth:`turns`, kept from one call to the next while only newer turns are
        answered (a reader asks for them at every turn of the session)."""
        if self.held:
            return EarlierTurns(self.turns())
        if self._earlier is None:
            self._earlier = EarlierTurns(self.turns())
        return self._earlier

    def turns(self) -> list[HistoryTurn]:
        """The answered turns and those waiting for an approval, in the order they
        started."""
        answered, held = self.answered, self.held
        if not held:
            return [turn for t in self.messages if (turn := answered.get(t)) is not None]
        out = []
        for t in self.messages:
            turn = answered.get(t)
            if turn is None and (waiting := held.get(t)) is not None:
                turn = waiting.turn
            if turn is not None:
                out.append(turn)
        return out

    def drop(self, turn_ids: Sequence[str]) -> None:
        """Forget ``turn_ids`` (the oldest: a later entry of theirs is passed over, as
        one of a turn whose start a prune removed)."""
        for turn_id in turn_ids:
            self.messages.pop(turn_id, None)
            self.answered.pop(turn_id, None)
            self.held.pop(turn_id, None)
        self._earlier = None


@dataclass(slots=True)
class _Read:
    """What a :class:`HistoryReader` holds of one session: its conversation entries
    from ``first`` (a seq; -1 when it holds none) to ``head``, folded; ``starts``:
    the seq each held turn started at, oldest first."""

    conversation: _Conversation
    first: int
    head: int
    starts: dict[str, int]
    weighed: int = 0
    """How many turns it held when last weighed for :meth:`HistoryReader._trim`."""

    @classmethod
    def of(cls, rows: Sequence[Row]) -> _Read:
        """``rows`` (in seq order, a conversation's newest entries) folded."""
        read = cls(_Conversation(), int(rows[0][0]) if rows else -1,
                   int(rows[-1][0]) if rows else -1, {})
        read.add(rows)
        return read

    def add(self, rows: Sequence[Row]) -> None:
        """Entries after :attr:`head`, in seq order."""
        if rows and self.first < 0:
            self.first = int(rows[0][0])
        for row in rows:
            if row[1] == TurnStarted.kind and row[2] is not None:
                self.starts.setdefault(row[2], int(row[0]))
        self.conversation.add(rows)
        if rows:
            self.head = int(rows[-1][0])


FIRST_PAGE = 64
"""Entries a conversation is first read back with from its end; a further page (only
while the turns read do not fill the window) holds as many as the tokens still
wanted take at the rate of those read, and a quarter more."""


TRIM_EVERY = 16
"""A session held is weighed (to forget what no window can hold) each time it holds
this many more turns."""


class HistoryReader:
    """Session histories for a long-running process: each session's conversation is
    kept after it is read, and each later read brings it up to date with only what
    is new.

    The ledger stays the only store: every read asks the ledger for the entries
    after the newest one held, so entries appended by any process are seen, and
    for the oldest one held, so a prune, which removes the oldest entries, makes
    the next read a whole one. Neither costs more as the session grows: both are
    found through the session's index. At most ``size`` sessions are kept, the
    least recently read dropped first.

    A request holds only the newest turns that fit the model's window. Given the
    window (``tokens``), a session is read back from its end, only until the turns
    read hold that many tokens, and no more than about half as much again is kept: a long
    conversation costs what a short one does, to read and to keep. Each body read
    is checked against the digest its entry names once, when it is read, so the
    model is only ever sent text that matched the record.
    """

    def __init__(self, ledger: object, *, size: int = 256) -> None:
        selecting(ledger)  # a ledger it cannot read is refused now, not at the first turn
        self._ledger = ledger
        self._size = size
        self._kept: OrderedDict[str, _Read] = OrderedDict()

    async def history(self, session_id: str, *, tokens: int | None = None,
                      count: Counter = estimate_tokens) -> EarlierTurns:
        """As :func:`session_history`; with ``tokens``, only the newest answered turns
        that hold at least that many tokens (as ``count`` weighs them, by
        :func:`overt.sessions.window.turn_tokens`), or all when they hold fewer:
        older turns cannot be in a request to a model whose window is ``tokens``.
        The turns are the reader's own, grown at the session's next read: a turn
        uses them before that read.

        Raises:
            LedgerError: the ledger could not be read, or an entry is malformed.
        """
        kept = self._kept.pop(session_id, None)
        if kept is not None:
            rows = await conversations.conversation_since(self._ledger, session_id,
                                                          kept.first, kept.head)
            if kept.first < 0 or (rows and int(rows[0][0]) == kept.first):
                kept.add(rows[1:] if kept.first >= 0 else rows)
            else:  # the oldest entry held is gone (a prune): read the session again
                kept = None
        if kept is None:
            kept = await self._read(session_id, tokens, count)
        turns = kept.conversation.earlier()
        if tokens is not None and self._trim(kept, turns, tokens, count):
            turns = kept.conversation.earlier()
        self._kept[session_id] = kept
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return turns

    async def _read(self, session_id: str, tokens: int | None, count: Counter) -> _Read:
        """The session read from its end: all of it, or (``tokens``) pages of entries
        (:data:`FIRST_PAGE`) until the turns read hold ``tokens``."""
        if tokens is None:
            return _Read.of(await conversations.conversation(self._ledger, session_id))
        rows: list[Row] = []
        before, limit = 1 << 62, FIRST_PAGE
        while True:
            page = await conversations.conversation_before(self._ledger, session_id,
                                                           before, limit)
            rows[:0] = reversed(page)
            read = _Read.of(rows)
            held = _weight(read.conversation.turns(), count)
            if len(page) < limit or held >= tokens:
                return read
            # as many entries again as the tokens still wanted take at the rate so far
            before = int(page[-1][0])
            limit = max(FIRST_PAGE, len(rows) * (tokens - held) * 5 // (4 * held)
                        if held else len(rows))

    def _trim(self, kept: _Read, turns: EarlierTurns, tokens: int, count: Counter) -> bool:
        """Forget the oldest turns held while the newer ones hold half as much again as
        ``tokens`` (weighed again once :data:`TRIM_EVERY` more turns are held);
        whether any were. ``turns``: the answered turns held."""
        if len(turns) < kept.weighed + TRIM_EVERY:
            return False
        kept.weighed = len(turns)
        if turns.totals(count)[-1] * 2 < 3 * tokens:
            return False
        total, oldest = 0, len(turns)
        while total < tokens:  # the newest turns that hold ``tokens``
            oldest -= 1
            total += turn_tokens(turns[oldest], count)
        keep = turns[oldest].turn_id
        older = []
        for turn_id in kept.starts:
            if turn_id == keep:
                break
            older.append(turn_id)
        kept.conversation.drop(older)
        for turn_id in older:
            del kept.starts[turn_id]
        kept.first = kept.starts[keep]
        kept.weighed = len(turns) - oldest
        return True


def _weight(turns: Sequence[HistoryTurn], count: Counter) -> int:
    return sum(turn_tokens(t, count) for t in turns)


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
