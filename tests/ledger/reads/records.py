"""Events to record for the typed reads' tests: turns, their tool calls and answers,
with the bodies they name."""

from __future__ import annotations

from typing import Any

from overt.events import Event, ToolCallCompleted, ToolCallStarted, TurnCompleted, TurnStarted
from overt.ledger.canonical import digest_text

OPERATOR = "operator:default"
"""Who sends a message when a test names nobody: a runtime's default operator."""


def started(turn: str, session: str | None, *, message: str = "",
            actor: str = OPERATOR, source: str = "cli") -> TurnStarted:
    return TurnStarted(turn_id=turn, session_id=session, source=source,
                       caller_session_id="cli:s", model="scripted", route="default",
                       max_tool_calls=5, message_digest=digest_text(message or turn),
                       actor=actor)


def ended(turn: str, session: str | None, status: str = "completed", *, reply: str = "",
          cost: float = 0.0, duration: float = 1.0, tool_calls: int = 0) -> TurnCompleted:
    failed = status != "completed"
    return TurnCompleted(turn_id=turn, session_id=session, status=status,  # type: ignore[arg-type]
                         reply_digest=digest_text(reply) if reply else None, tools_used=[],
                         tool_calls=tool_calls, model_calls=1, input_tokens=3,
                         output_tokens=4, cost_usd=cost, duration_ms=duration,
                         error_type="RuntimeError" if failed else None,
                         error_kind="model_error" if failed else None)


def call(turn: str, session: str | None, call_id: str, name: str, args: str,
         result: str, status: str = "ok") -> list[Event]:
    """A tool call's start and completion."""
    common: dict[str, Any] = {"turn_id": turn, "session_id": session, "tool_call_id": call_id,
                              "tool_name": name, "triggered_by": "model",
                              "caller_session_id": "cli:s", "args_sha256": digest_text(args)}
    return [ToolCallStarted(**common),
            ToolCallCompleted(**common, tool_status=status,  # type: ignore[arg-type]
                              tool_duration_ms=1.0, exc_type=None,
                              result_digest=digest_text(result))]


def turn(ledger: Any, turn_id: str, session: str | None, *, message: str, reply: str,
         actor: str = OPERATOR, status: str = "completed", cost: float = 0.0,
         duration: float = 1.0) -> None:
    """A turn with its message and answer recorded, bodies and all (one commit)."""
    ledger.record_sync([started(turn_id, session, message=message, actor=actor),
                        ended(turn_id, session, status, reply=reply, cost=cost,
                              duration=duration)],
                       {digest_text(message): message, digest_text(reply): reply})
