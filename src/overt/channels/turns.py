"""A turn's state read back from the ledger: the answer, whichever process gave it.

A turn that paused for an approval is answered by whoever took it up (an HTTP
call, an MCP tool, ``overt approvals approve`` in another process): its answer
is on the record, so a channel that waits for it reads the ledger, not memory.
"""

from __future__ import annotations

import time
from typing import Any

from overt.events import TurnCompleted, TurnPaused, TurnResumed, TurnStarted
from overt.ledger.base import Ledger
from overt.ledger.notify import Backoff

TURN_KINDS = (TurnStarted.kind, TurnPaused.kind, TurnResumed.kind, TurnCompleted.kind)


async def turn_state(ledger: Ledger, turn_id: str) -> dict[str, Any] | None:
    """The turn as a channel reports it, or ``None`` when there is no such turn.

    ``status`` is ``running``, ``awaiting_approval`` (``awaiting_approval`` names
    the request) or how the turn ended (``completed``, ``model_error`` …), with
    ``text`` and ``tools_used`` once it ended.
    """
    entries = await ledger.entries(turn_id=turn_id, kinds=TURN_KINDS)
    started = next((e for e in entries if e.kind == "turn.started"), None)
    if started is None:
        return None
    began = started.event(TurnStarted)
    state: dict[str, Any] = {
        "turn_id": turn_id, "session_id": started.session_id,
        "source": began.source, "caller_session_id": began.caller_session_id,
        "started_at": started.at, "status": "running", "awaiting_approval": None,
        "text": None, "tools_used": None, "error": None,
        "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
        "completed_at": None,
    }
    last = entries[-1]
    match last.event():
        case TurnPaused(request_id=request_id):
            state["status"] = "awaiting_approval"
            state["awaiting_approval"] = request_id
        case TurnCompleted() as done:
            state.update(
                status=done.status, tools_used=done.tools_used,
                text=await ledger.content(done.reply_digest) if done.reply_digest else None,
                error=done.error_type, completed_at=last.at,
                usage={"input_tokens": done.input_tokens, "output_tokens": done.output_tokens,
                       "cost_usd": done.cost_usd})
    return state


async def wait_for_answer(ledger: Ledger, turn_id: str, *, timeout_s: float,
                          backoff: Backoff | None = None) -> dict[str, Any] | None:
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
        if state is None or state["completed_at"] is not None or left <= 0:
            return state
        await ledger.appended.wait(seen, min(wait.next(), left), turn_id=turn_id)
