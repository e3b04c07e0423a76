"""A turn's events waiting for the next commit, who hears of them once committed, which
request parts an engine has committed, the records of a tool call (the same from a
turn and from a direct run), and how model-chosen values are made fit for the audit
tier."""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from overt.engine.dispatch import ToolOutcome
from overt.events import (
    ApprovalDecision,
    Event,
    HookError,
    ToolCallCompleted,
    ToolCallStarted,
    TurnResumed,
)
from overt.hooks.calls import Impl
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.ledger.canonical import canonical_json, digest_text
from overt.ledger.chain import clean_text
from overt.types import ModelResponse, ToolCall

log = logging.getLogger("overt.hooks")


class PartStore:
    """Which parts this engine has committed (their digests), so each is stored once.

    A part is added to a turn's next commit only when it is not known here
    (:meth:`Recorder.part`); the recorder adds what it committed (:meth:`Recorder.flush`).
    Bounded: past ``limit`` digests it starts over (parts are then stored again once).
    """

    def __init__(self, limit: int = 500_000) -> None:
        self.known: set[str] = set()
        self.limit = limit

    def learn(self, digests: Sequence[str] | Mapping[str, str]) -> None:
        if len(self.known) > self.limit:
            self.known.clear()
        self.known.update(digests)


class Recorder:
    """Events waiting for the next commit, and the content they reference.

    After a commit, each event goes to the engine's observers and to the
    ``on_event`` hook implementations, in order: they only ever see what is
    on the record.
    """

    def __init__(self, ledger: Ledger, observers: Sequence[Callable[[Event], None]],
                 on_event: tuple[Impl, ...] = (), parts: PartStore | None = None) -> None:
        self.ledger = ledger
        self.parts = parts
        self.observers = observers
        self.on_event = on_event
        self.events: list[Event] = []
        self.contents: dict[str, str] = {}

    def add(self, event: Event, **contents: str) -> None:
        self.events.append(event)
        for digest, body in contents.items():
            self.contents[digest] = body

    def content(self, body: str) -> str:
        """Keep ``body`` for the content tier; its digest."""
        body = clean_text(body)
        digest = digest_text(body)
        self.contents[digest] = body
        return digest

    def part(self, body: str, digest: str | None = None, /) -> str:
        """Keep ``body``, a part of a request (:mod:`overt.engine.request_body`), unless
        it was committed before; its digest (``digest``: known already, of ``body``
        made storable)."""
        if digest is None:
            body = clean_text(body)
            digest = digest_text(body)
        if self.parts is None or digest not in self.parts.known:
            self.contents[digest] = body
        return digest

    async def flush(self) -> None:
        """Commit what is waiting (raises :class:`LedgerError` if it cannot be)."""
        if not self.events and not self.contents:
            return
        events, contents = self.events, self.contents
        self.events, self.contents = [], {}
        await self.ledger.record(events, contents)
        if self.parts is not None:
            self.parts.learn(contents)
        for event in events:
            for observer in self.observers:
                observer(event)
            for impl in self.on_event:
                try:
                    answer = impl.function(event) if impl.argnames else impl.function()
                    if impl.is_async:
                        await answer
                except Exception as exc:  # noqa: BLE001  an observer's failure is recorded
                    self._failed(impl, event, exc)

    def _failed(self, impl: Impl, event: Event, exc: Exception) -> None:
        log.warning("plugin %s: on_event raised %s on %s", impl.plugin, type(exc).__name__,
                    event.kind)
        if isinstance(event, HookError):
            return  # only logged: a broken observer must not feed itself
        self.add(HookError(
            turn_id=event.turn_id, session_id=event.session_id, plugin=impl.plugin,
            hook="on_event", error_type=type(exc).__name__, consequence="ignored",
            error_digest=self.content(f"{type(exc).__name__}: {exc}")))


def jsonable(value: object) -> object:
    """``value`` if it is JSON as it is, else its repr (malformed model output)."""
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


def audit_name(name: str, *, known: bool = True) -> str:
    """A tool name as the audit tier records it.

    ``known`` is whether ``name`` is one overt offered (registered, or added by
    a plugin's declaration): such names are the operator's vocabulary and are
    recorded as they are (printable, at most 128 chars). A name the model
    invented is never recorded verbatim: its tagged digest stands in for it,
    so a model cannot write text into the audit tier through a tool name.
    """
    if not known:
        return digest_text(name)
    if name.isidentifier() and len(name) <= 128:
        return name  # the usual case: a plain name, nothing to clean
    cleaned = _UNPRINTABLE.sub("?", name)
    return cleaned if len(cleaned) <= 128 else cleaned[:127] + "…"


def overt_call_id() -> str:
    """A tool-call id overt makes; it stands in for the model's own id everywhere.

    A model's tool-call id is model-chosen text: it is kept only in the content
    tier (the recorded model response) and never reaches an audit row.
    """
    return f"call_{new_ulid()}"


def canonical_or_repr(value: object) -> str:
    """``value`` as canonical JSON, or its repr as a JSON string."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return canonical_json(repr(value))


@dataclass(frozen=True, slots=True)
class CallSite:
    """Where tool calls come from: the ids every tool-call record carries."""

    turn_id: str | None
    session_id: str | None
    source: str
    caller_session_id: str

    def intent(self, call: ToolCall, args_digest: str) -> ToolCallStarted:
        """The record committed before a call's effect (only ever for an offered tool)."""
        return ToolCallStarted(
            turn_id=self.turn_id, session_id=self.session_id, tool_call_id=call.id,
            tool_name=audit_name(call.name), triggered_by=self.source,
            caller_session_id=self.caller_session_id, args_sha256=args_digest)

    def completion(self, call: ToolCall, outcome: ToolOutcome, args_digest: str,
                   result_digest: str, provided_by: str | None = None, *,
                   known: bool = True) -> ToolCallCompleted:
        """The record of how a call ended (run, refused, failed or timed out).

        ``known``: whether the tool name is one overt offered; an invented one is
        recorded as its digest (and the outcome's status is ``unknown_tool``).
        """
        return ToolCallCompleted(
            turn_id=self.turn_id, session_id=self.session_id, tool_call_id=call.id,
            tool_name=audit_name(call.name, known=known and outcome.status != "unknown_tool"),
            triggered_by=self.source,
            caller_session_id=self.caller_session_id, tool_status=outcome.status,
            tool_duration_ms=outcome.duration_ms, exc_type=outcome.exc_type,
            args_sha256=args_digest, result_digest=result_digest,
            reason_code=outcome.reason_code, provided_by=provided_by)


def resumption(turn_id: str | None, session_id: str | None, request_id: str,
               decision: ApprovalDecision, resumed_by: str) -> TurnResumed:
    """The claim that takes up what a decided request held, in this process."""
    return TurnResumed(turn_id=turn_id, session_id=session_id, claim=request_id,
                       request_id=request_id, decision=decision, resumed_by=resumed_by,
                       pid=os.getpid(), host=socket.gethostname())


def response_body(response: ModelResponse) -> str:
    """A model response as the content tier stores it (canonical JSON).

    Encoded once; only output that is not JSON as it is (malformed arguments)
    takes the slower path that stores such arguments as their repr.
    """
    def body(arguments: Callable[[object], object]) -> str:
        return canonical_json({
            "text": response.text, "reasoning": response.reasoning,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": arguments(c.arguments),
                            "malformed": c.malformed} for c in response.tool_calls],
        })

    try:
        return body(lambda arguments: arguments)
    except (TypeError, ValueError):
        return body(jsonable)

