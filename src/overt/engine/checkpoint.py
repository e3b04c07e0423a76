"""A paused turn as data: everything a process needs to take it up again.

Written to the content tier when a turn pauses for an approval (the audit
tier's ``turn.paused`` names it by digest), read back by whichever process
resumes it, after any restart. It holds the conversation as the model saw it,
the held call and the calls of the same response not yet run, and the turn's
counters, so limits and numbering carry on where they stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from overt.engine.record import jsonable
from overt.errors import LedgerIntegrityError, ModelUnavailable, OvertError
from overt.ledger.canonical import canonical_json
from overt.models.base import Model
from overt.types import Message, ToolCall, Usage

VERSION = 1


@dataclass(slots=True)
class Checkpoint:
    """The state of a turn paused on ``held``."""

    turn_id: str
    session_id: str
    source: str
    caller_session_id: str
    route: str
    actor: str
    messages: list[Message]
    offered: list[str]
    held: ToolCall
    remaining: list[ToolCall]
    tools_allowed: bool = True
    error_streak: int = 0
    last_error: str = ""
    iteration: int = 0
    tool_calls: int = 0
    response_calls: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    tools_used: list[str] = field(default_factory=list)
    next_step: int = 0
    duration_ms: float = 0.0
    model: str = ""
    """The spec of the model the turn ran on (empty in checkpoints written before
    it was recorded): the turn resumes on it, wherever it is approved."""

    def to_json(self) -> str:
        return canonical_json({
            "version": VERSION, "turn_id": self.turn_id, "session_id": self.session_id,
            "source": self.source, "caller_session_id": self.caller_session_id,
            "route": self.route, "actor": self.actor,
            "messages": [_message(m) for m in self.messages], "offered": self.offered,
            "held": _call(self.held), "remaining": [_call(c) for c in self.remaining],
            "tools_allowed": self.tools_allowed, "error_streak": self.error_streak,
            "last_error": self.last_error, "iteration": self.iteration,
            "tool_calls": self.tool_calls, "model_calls": self.model_calls,
            "response_calls": self.response_calls,
            "usage": self.usage.to_dict(), "tools_used": self.tools_used,
            "next_step": self.next_step, "duration_ms": self.duration_ms,
            "model": self.model,
        })

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        """Raises:
            LedgerIntegrityError: the body is not a checkpoint this version reads.
        """
        try:
            d = json.loads(text)
            if d.get("version") != VERSION:
                raise ValueError(f"checkpoint version {d.get('version')!r}")
            u = d["usage"]
            return cls(
                turn_id=d["turn_id"], session_id=d["session_id"], source=d["source"],
                caller_session_id=d["caller_session_id"], route=d["route"], actor=d["actor"],
                messages=[_to_message(m) for m in d["messages"]], offered=list(d["offered"]),
                held=_to_call(d["held"]), remaining=[_to_call(c) for c in d["remaining"]],
                tools_allowed=bool(d["tools_allowed"]), error_streak=int(d["error_streak"]),
                last_error=str(d["last_error"]), iteration=int(d["iteration"]),
                tool_calls=int(d["tool_calls"]), model_calls=int(d["model_calls"]),
                response_calls=int(d.get("response_calls", d["tool_calls"])),
                usage=Usage(int(u["input_tokens"]), int(u["output_tokens"]),
                            float(u["cost_usd"])),
                tools_used=[str(t) for t in d["tools_used"]], next_step=int(d["next_step"]),
                duration_ms=float(d["duration_ms"]), model=str(d.get("model") or ""))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LedgerIntegrityError(f"unreadable turn checkpoint: {exc}") from exc


def _call(call: ToolCall) -> dict[str, Any]:
    arguments = jsonable(call.arguments)  # a malformed call's arguments may not be JSON
    return {"id": call.id, "name": call.name,
            "arguments": arguments if isinstance(arguments, Mapping) else {},
            "malformed": call.malformed}


def _to_call(d: Mapping[str, Any]) -> ToolCall:
    return ToolCall(str(d["id"]), str(d["name"]), dict(d["arguments"]), d.get("malformed"))


def _message(m: Message) -> dict[str, Any]:
    return {"role": m.role, "content": m.content, "tool_calls": [_call(c) for c in m.tool_calls],
            "tool_call_id": m.tool_call_id, "name": m.name, "is_error": m.is_error}


def _to_message(d: Mapping[str, Any]) -> Message:
    calls: Sequence[Mapping[str, Any]] = d.get("tool_calls") or ()
    return Message(d["role"], str(d["content"]), tuple(_to_call(c) for c in calls),
                   d.get("tool_call_id"), d.get("name"), bool(d.get("is_error", False)))


def resume_model(checkpoint: Checkpoint, current: Model, current_spec: str | None,
                 resolve: Callable[[str], Model] | None) -> Model:
    """The model ``checkpoint``'s turn ran on: ``current`` when it is that one, else
    built by ``resolve`` (a runtime's model catalog).

    Raises:
        ModelUnavailable: it cannot be built here.
    """
    spec = checkpoint.model
    if not spec or spec in (current_spec, current.name):
        return current
    if resolve is None:
        raise ModelUnavailable(spec, "this engine resolves no other models")
    try:
        return resolve(spec)
    except OvertError as exc:
        raise ModelUnavailable(spec, f"{type(exc).__name__}: {exc}") from exc
