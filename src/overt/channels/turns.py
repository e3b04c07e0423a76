"""A turn's state read back from the ledger: the answer, whichever process gave it.

A turn that paused for an approval is answered by whoever took it up (an HTTP
call, an MCP tool, ``overt approvals approve`` in another process): its answer
is on the record, so a channel that waits for it reads the ledger, not memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, cast

from overt.events import (
    TURN_ERROR_KINDS,
    TurnCompleted,
    TurnErrorKind,
    TurnPaused,
    TurnResumed,
    TurnStarted,
)
from overt.ledger.base import Entry, Ledger
from overt.ledger.notify import Backoff
from overt.types import TurnError, Usage

TURN_KINDS = (TurnStarted.kind, TurnPaused.kind, TurnResumed.kind, TurnCompleted.kind)


@dataclass(frozen=True, slots=True)
class TurnState:
    """A turn as a channel reports it.

    ``status`` is ``running``, ``awaiting_approval`` (``awaiting_approval`` names
    the request) or how the turn ended (``completed``, ``model_error`` …, the
    ``status`` of its ``turn.completed``), with ``text``, ``tools_used``, ``usage``
    and, when it ended without its answer, ``error``, once it ended.
    """

    turn_id: str
    session_id: str | None
    source: str
    caller_session_id: str
    started_at: str
    status: str = "running"
    awaiting_approval: str | None = None
    text: str | None = None
    tools_used: list[str] | None = None
    error: TurnError | None = None
    usage: Usage = field(default_factory=Usage)
    completed_at: str | None = None

    @property
    def ended(self) -> bool:
        return self.completed_at is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id, "session_id": self.session_id, "source": self.source,
            "caller_session_id": self.caller_session_id, "started_at": self.started_at,
            "status": self.status, "awaiting_approval": self.awaiting_approval,
            "text": self.text, "tools_used": self.tools_used,
            "error": self.error.to_dict() if self.error is not None else None,
            "usage": self.usage.to_dict(), "completed_at": self.completed_at,
        }


async def turn_state(ledger: Ledger, turn_id: str) -> TurnState | None:
    """The turn as a channel reports it, or ``None`` when there is no such turn."""
    entries = await ledger.entries(turn_id=turn_id, kinds=TURN_KINDS)
    started = next((e for e in entries if e.kind == TurnStarted.kind), None)
    if started is None:
        return None
    began = started.event(TurnStarted)
    state = TurnState(turn_id, started.session_id, began.source, began.caller_session_id,
                      started.at)
    last = entries[-1]
    match last.event():
        case TurnPaused(request_id=request_id):
            return replace(state, status="awaiting_approval", awaiting_approval=request_id)
        case TurnCompleted() as done:
            text = await ledger.content(done.reply_digest, seq=last.seq) \
                if done.reply_digest else None
            return replace(
                state, status=done.status, tools_used=done.tools_used, text=text,
                error=await turn_error(ledger, last, done), completed_at=last.at,
                usage=Usage(done.input_tokens, done.output_tokens, done.cost_usd))
    return state


async def turn_error(ledger: Ledger, entry: Entry, done: TurnCompleted) -> TurnError | None:
    """Why the turn ``done`` (recorded as ``entry``) ended without its answer, or ``None``.

    An entry written before ``turn.completed`` recorded ``error_kind`` says it by its
    ``status`` (one of the kinds) and ``error_type``, without a message of its own.
    """
    kind = done.error_kind or (cast(TurnErrorKind, done.status)
                               if done.status in TURN_ERROR_KINDS else None)
    if kind is None:
        return None
    message = await ledger.content(done.error_digest, seq=entry.seq) \
        if done.error_digest else None
    return TurnError(kind, message or done.error_type or kind, done.error_type)


def answered(state: TurnState) -> dict[str, Any]:
    """What an ended turn's state changes in the reply that said it awaited an approval
    (a :meth:`~overt.types.ResponseResult.to_dict`): the answer, once decided."""
    return {"text": state.text or "", "tools_used": state.tools_used,
            "error": state.error.to_dict() if state.error is not None else None,
            "awaiting_approval": None}


async def wait_for_answer(ledger: Ledger, turn_id: str, *, timeout_s: float,
                          backoff: Backoff | None = None) -> TurnState | None:
    """The turn's state once it has ended, or as it is after ``timeout_s``.

    Woken by this process's appends (:attr:`Ledger.appended`); another process's
    answer is read within the back-off's ceiling (:mod:`overt.ledger.notify`).
    """
    deadline = time.monotonic() + timeout_s
    wait = backoff or Backoff()
    while True:
        seen = ledger.appended.seq
        state = await turn_state(ledger, turn_id)
        left = deadline - time.monotonic()
        if state is None or state.ended or left <= 0:
            return state
        await ledger.appended.wait(seen, min(wait.next(), left), turn_id=turn_id)
