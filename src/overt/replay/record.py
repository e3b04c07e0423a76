"""One recorded turn, as replay reads it: its events by kind, in order, and the
bodies the engine needs to be answered from the record."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from overt.errors import LedgerIntegrityError
from overt.events import (
    ApprovalRequested,
    Event,
    HookBlocked,
    HookProvided,
    InferenceRecorded,
    PolicyDecided,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnResumed,
    TurnStarted,
)
from overt.ledger.base import Entry, Ledger
from overt.types import ModelResponse, ToolCall, Usage


@dataclass(slots=True)
class RecordedTurn:
    """The events of one turn, in the order they were recorded."""

    turn_id: str
    started: TurnStarted
    text: str
    seq: int
    """The seq of its ``turn.started``."""
    inferences: list[tuple[InferenceRecorded, int]] = field(default_factory=list)
    decisions: list[PolicyDecided] = field(default_factory=list)
    completions: list[ToolCallCompleted] = field(default_factory=list)
    executed: list[ToolCallCompleted] = field(default_factory=list)
    """The completions of calls whose tool ran (a ``tool_call.started`` before them, no
    plugin's result): what the recorded-result executor answers, in order."""
    hooks: list[HookBlocked | HookProvided] = field(default_factory=list)
    requested: list[ApprovalRequested] = field(default_factory=list)
    resumed: list[TurnResumed] = field(default_factory=list)
    completed: TurnCompleted | None = None
    ids: dict[str, list[str]] = field(default_factory=dict)
    """Overt's ids in the order they first appear, per kind of id (``tool_call_id``,
    ``request_id``, ``decision_id``): how a replayed id is matched to its recorded one."""


def note_ids(ids: dict[str, list[str]], seen: set[str], event: Event) -> None:
    """Add ``event``'s overt ids to ``ids`` (each once, in order of appearance)."""
    for name in ("tool_call_id", "request_id", "decision_id"):
        value = getattr(event, name, None)
        if isinstance(value, str) and value not in seen:
            seen.add(value)
            ids.setdefault(name, []).append(value)


class Reads(Protocol):
    """Where bodies are read from: a ledger, or replay's bulk reads of one."""

    async def content(self, digest: str, *, seq: int | None = None) -> str | None: ...


async def read_turn(bodies: Reads, turn_id: str, entries: list[Entry] | None = None,
                    ledger: Ledger | None = None) -> RecordedTurn | None:
    """The recorded turn ``turn_id``; ``None`` if it has no ``turn.started`` (it began
    in a pruned range, or is no turn).

    Raises:
        LedgerIntegrityError: the operator's message is not held (a body missing).
    """
    if entries is None:
        if ledger is None:
            return None
        entries = await ledger.entries(turn_id=turn_id)
    turn: RecordedTurn | None = None
    started_calls: set[str] = set()
    seen: set[str] = set()
    for entry in entries:
        event = entry.event()
        if isinstance(event, TurnStarted):
            text = await bodies.content(event.message_digest, seq=entry.seq)
            if text is None:
                raise LedgerIntegrityError(f"turn {turn_id}: its message is not held")
            turn = RecordedTurn(turn_id, event, text, entry.seq)
            continue
        if turn is None:
            continue
        note_ids(turn.ids, seen, event)
        match event:
            case InferenceRecorded():
                turn.inferences.append((event, entry.seq))
            case PolicyDecided():
                turn.decisions.append(event)
            case ToolCallStarted():
                started_calls.add(event.tool_call_id)
            case ToolCallCompleted():
                turn.completions.append(event)
                if event.tool_call_id in started_calls and event.provided_by is None:
                    turn.executed.append(event)
            case HookBlocked() | HookProvided():
                turn.hooks.append(event)
            case ApprovalRequested():
                turn.requested.append(event)
            case TurnResumed():
                turn.resumed.append(event)
            case TurnCompleted():
                turn.completed = event
    return turn


def response_from_body(body: str, inference: InferenceRecorded) -> ModelResponse:
    """A recorded response body (``response_body``) as the model's reply.

    Raises:
        LedgerIntegrityError: the body is not a response body.
    """
    try:
        data: dict[str, Any] = json.loads(body)
        calls = tuple(ToolCall(str(c["id"]), str(c["name"]), c["arguments"]
                               if isinstance(c["arguments"], dict) else {},
                               c.get("malformed")) for c in data["tool_calls"])
        return ModelResponse(
            text=str(data["text"]), tool_calls=calls,
            usage=Usage(inference.input_tokens, inference.output_tokens, inference.cost_usd),
            model=inference.model, stop_reason=inference.stop_reason,
            reasoning=str(data.get("reasoning", "")))
    except (ValueError, KeyError, TypeError) as exc:
        raise LedgerIntegrityError(f"inference {inference.inference_id}: its response body "
                                   f"cannot be read: {exc}") from None
