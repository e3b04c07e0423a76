"""Sessions read back from the ledger: who owns one, what it holds, its conversation.

A session is the unit of conversation: the turns recorded under one ``session_id``.
Nothing about it is stored apart from the record: its owner is the actor its first
turn recorded (``turn.started``'s ``actor``), and its history is rebuilt from the
audit entries and the bodies they name in the content tier, so it cannot disagree
with the record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from overt.errors import LedgerError, UsageError
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


def _data(raw: Any) -> dict[str, Any]:
    value = json.loads(raw) if isinstance(raw, (str, bytes, bytearray)) else raw
    if not isinstance(value, dict):
        raise LedgerError(f"entry data is not a JSON object: {str(raw)[:80]!r}")
    return value


def _text(body: Any) -> str | None:
    if body is None:
        return None
    if isinstance(body, str):
        return body
    return bytes(body).decode("utf-8")


def _info(row: Sequence[Any], legacy_owner: str) -> SessionInfo:
    data = _data(row[5])
    return SessionInfo(session_id=row[0], source=str(data.get("source", "")),
                       owner=str(data.get("actor") or legacy_owner), turns=int(row[1]),
                       started_at=row[2], last_at=row[3],
                       title_digest=data.get("message_digest"), first_seq=int(row[4]))


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
                        source: str | None = None, limit: int = 50,
                        legacy_owner: str = LEGACY_OWNER) -> list[SessionInfo]:
    """Sessions, the most recently active first; only ``owner``'s, or ``source``'s,
    when given.

    Raises:
        LedgerError: the ledger could not be read.
    """
    params: list[Any] = []
    if owner is not None:
        params += [legacy_owner, owner]
    if source is not None:
        params.append(source)
    params.append(int(limit))
    reader = _reader(ledger)
    statement = queries.sessions(dialect(reader), by_owner=owner is not None,
                                 by_source=source is not None)
    return [_info(row, legacy_owner) for row in await reader.select(statement, tuple(params))]


async def session_history(ledger: object, session_id: str, *,
                          before_turn: str | None = None) -> list[HistoryTurn]:
    """The answered turns of ``session_id``, oldest first, each as the messages the
    model saw and said: the user's message, each tool call with its result, the
    answer. Turns not answered yet (in progress, paused for approval) and turns that
    failed are left out; so is ``before_turn`` and every turn started after it.

    Raises:
        LedgerError: the ledger could not be read, or an entry is malformed.
        UsageError: ``ledger`` has no plain reads (a ledger of a third party's
            that does not offer ``select``): no history can be rebuilt from it.
    """
    reader = _reader(ledger)
    rows = await reader.select(queries.conversation(dialect(reader)), (session_id,))
    turns: dict[str, list[Message]] = {}
    answered: dict[str, bool] = {}
    order: list[str] = []
    for _seq, kind, turn_id, raw, body, args_body in rows:
        if turn_id is None:
            continue
        if turn_id == before_turn:
            break
        data = _data(raw)
        text = _text(body)
        if kind == "turn.started":
            if turn_id not in turns:
                order.append(turn_id)
                turns[turn_id] = [Message("user", text if text is not None else "")]
            continue
        messages = turns.get(turn_id)
        if messages is None:  # the turn started before a prune: its beginning is gone
            continue
        if kind == "tool_call.completed":
            call_id = str(data.get("tool_call_id", ""))
            name = str(data.get("tool_name", ""))
            try:
                arguments = json.loads(_text(args_body) or "{}")
            except ValueError:
                arguments = {}
            if not isinstance(arguments, dict):
                arguments = {}
            messages.append(Message("assistant", "", (ToolCall(call_id, name, arguments),)))
            messages.append(Message("tool", text if text is not None else "(result not stored)",
                                    tool_call_id=call_id, name=name,
                                    is_error=data.get("tool_status") != "ok"))
        elif kind == "turn.completed":
            answered[turn_id] = data.get("status") in ANSWERED and text is not None
            messages.append(Message("assistant", text or ""))
    return [HistoryTurn(t, tuple(turns[t])) for t in order if answered.get(t)]


async def title(ledger: Any, info: SessionInfo, *, width: int = 60) -> str:
    """The session's title: its first message, on one line, cut to ``width``."""
    if info.title_digest is None:
        return ""
    body = await ledger.content(info.title_digest, seq=info.first_seq)
    if body is None:
        return "(pruned)"
    line = " ".join(body.split())
    return line if len(line) <= width else line[: width - 1] + "…"
