"""The loop of one turn: model -> tool calls -> tool results -> ... -> final text.

Recording rule: every effect (a model call, a tool execution) happens only
after the records of the steps before it are committed. Records are batched
up to the next effect, so a turn with two model calls and two tool calls
commits five times, and a process killed anywhere leaves a ledger that
verifies, with every executed tool preceded by its ``tool_call.started``.

Limits: at most ``max_tool_calls`` tool calls per response (calls past it get
``tool_call_limit_exceeded`` and are recorded ``not_allowed``; the model then
gets one last call without tools to answer); ``max_consecutive_tool_errors``
failed calls in a row end the loop with a plain answer saying so.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from overt.engine.dispatch import ToolOutcome, execute, precheck
from overt.errors import LedgerError
from overt.events import (
    Event,
    InferenceRecorded,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnStarted,
    TurnStatus,
)
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.ledger.canonical import canonical_json, digest_text
from overt.ledger.chain import clean_text
from overt.models.base import Model
from overt.tools.base import ToolContext
from overt.tools.registry import ToolRegistry
from overt.types import (
    IncomingMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ResponseResult,
    ToolCall,
    Usage,
)

audit_log = logging.getLogger("overt.audit")
log = logging.getLogger("overt.engine")


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Limits of one turn."""

    max_tool_calls: int = 5
    max_consecutive_tool_errors: int = 3
    tool_timeout_s: float | None = 30.0
    route: str = "default"
    max_output_tokens: int | None = None


@dataclass(slots=True)
class TurnOutcome:
    """A finished turn: the result, and the conversation as the model last saw it."""

    result: ResponseResult
    messages: list[Message] = field(default_factory=list)


class _Recorder:
    """Events waiting for the next commit, and the content they reference."""

    def __init__(self, ledger: Ledger, observers: Sequence[Callable[[Event], None]]) -> None:
        self.ledger = ledger
        self.observers = observers
        self.events: list[Event] = []
        self.contents: dict[str, str] = {}

    def add(self, event: Event, **contents: str) -> None:
        self.events.append(event)
        for digest, body in contents.items():
            self.contents[digest] = body

    def content(self, body: str) -> str:
        body = clean_text(body)
        digest = digest_text(body)
        self.contents[digest] = body
        return digest

    async def flush(self) -> None:
        if not self.events and not self.contents:
            return
        events, contents = self.events, self.contents
        self.events, self.contents = [], {}
        await self.ledger.record(events, contents)
        for event in events:
            for observer in self.observers:
                observer(event)


class Engine:
    """Runs turns. Holds no per-turn state: one engine serves concurrent turns."""

    def __init__(self, model: Model, tools: ToolRegistry, ledger: Ledger, *,
                 system_prompt: str = "", settings: EngineSettings | None = None,
                 runtime_started_at: str = "",
                 observers: Sequence[Callable[[Event], None]] = ()) -> None:
        self.model = model
        self.tools = tools
        self.ledger = ledger
        self.system_prompt = system_prompt
        self.settings = settings or EngineSettings()
        self.runtime_started_at = runtime_started_at
        self.observers = list(observers)

    async def run_turn(self, message: IncomingMessage, *, session_id: str | None = None,
                       history: Sequence[Message] = ()) -> TurnOutcome:
        """Answer ``message``; never raises for a model, tool or ledger failure.

        A model failure ends the turn with ``error`` set and ``tools_used`` None;
        so does a ledger failure (overt does not act off the record).
        """
        turn = _Turn(self, message, session_id or message.caller_session_id)
        try:
            return await turn.run(history)
        except LedgerError as exc:
            log.error("turn %s stopped: the ledger failed: %s", turn.turn_id, exc)
            return TurnOutcome(turn.result(
                "I could not record this turn, so I stopped before acting.", None,
                f"ledger_error: {exc}"))


class _Turn:
    def __init__(self, engine: Engine, message: IncomingMessage, session_id: str) -> None:
        self.engine = engine
        self.message = message
        self.session_id = session_id
        self.caller_session_id = message.caller_session_id
        self.turn_id = new_ulid()
        self.started = time.perf_counter()
        self.usage = Usage()
        self.recorder = _Recorder(engine.ledger, engine.observers)
        self.tools_used: list[str] = []
        self.tool_calls = 0
        self.model_calls = 0
        self.error: str | None = None

    def result(self, text: str, tools_used: list[str] | None,
               error: str | None) -> ResponseResult:
        return ResponseResult(text, tools_used, self.usage, error, self.session_id,
                              self.turn_id)

    async def run(self, history: Sequence[Message]) -> TurnOutcome:
        engine, settings = self.engine, self.engine.settings
        rec = self.recorder
        rec.add(TurnStarted(
            turn_id=self.turn_id, session_id=self.session_id, source=self.message.source,
            caller_session_id=self.caller_session_id,
            message_digest=rec.content(self.message.text), model=engine.model.name,
            route=settings.route, max_tool_calls=settings.max_tool_calls))
        messages: list[Message] = []
        if engine.system_prompt:
            messages.append(Message("system", engine.system_prompt))
        messages.extend(history)
        messages.append(Message("user", self.message.text))
        specs = engine.tools.specs()
        offered = frozenset(s.name for s in specs)
        error_streak = 0
        last_error = ""
        tools_allowed = True
        while True:
            request = ModelRequest(tuple(messages), specs if tools_allowed else (),
                                   settings.max_output_tokens)
            response = await self._infer(request)
            if response is None:
                return await self._finish(messages, "model_error")
            calls = response.tool_calls if tools_allowed else ()
            if not calls:
                return await self._finish(messages, "completed", response.text)
            messages.append(Message("assistant", response.text, tool_calls=calls))
            for call in calls:
                outcome = await self._tool_call(call, offered)
                messages.append(Message("tool", outcome.content, tool_call_id=call.id,
                                        name=call.name, is_error=outcome.is_error))
                if outcome.is_error:
                    error_streak += 1
                    last_error = f"{call.name}: {outcome.content.split(':')[0]}"
                else:
                    error_streak = 0
                if error_streak >= settings.max_consecutive_tool_errors:
                    text = (f"I stopped: {error_streak} tool calls in a row failed "
                            f"(last: {last_error}). Nothing more was run for this request.")
                    return await self._finish(messages, "tool_error_streak", text)
            if self.tool_calls >= settings.max_tool_calls:
                tools_allowed = False  # the cap is reached: one last call, without tools

    async def _infer(self, request: ModelRequest) -> ModelResponse | None:
        """One model call, recorded; ``None`` if the model failed (recorded too)."""
        engine, rec = self.engine, self.recorder
        await rec.flush()
        inference_id = new_ulid()
        started = time.perf_counter()
        offered = [t.name for t in request.tools]
        self.model_calls += 1
        try:
            response = await engine.model.complete(request)
        except Exception as exc:  # noqa: BLE001  any adapter failure ends the turn, recorded
            self.error = f"model_error: {type(exc).__name__}: {exc}"
            rec.add(InferenceRecorded(
                turn_id=self.turn_id, session_id=self.session_id, inference_id=inference_id,
                iteration=self.model_calls - 1, model=engine.model.name,
                route=engine.settings.route, input_tokens=0, output_tokens=0, cost_usd=0.0,
                duration_ms=_ms_since(started), tools_offered=offered,
                tool_calls_requested=0, stop_reason="error", response_digest=None,
                error_type=type(exc).__name__))
            return None
        self.usage = self.usage + response.usage
        body = canonical_json({
            "text": response.text, "reasoning": response.reasoning,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": _jsonable(c.arguments),
                            "malformed": c.malformed} for c in response.tool_calls],
        })
        rec.add(InferenceRecorded(
            turn_id=self.turn_id, session_id=self.session_id, inference_id=inference_id,
            iteration=self.model_calls - 1, model=response.model or engine.model.name,
            route=engine.settings.route, input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens, cost_usd=response.usage.cost_usd,
            duration_ms=_ms_since(started), tools_offered=offered,
            tool_calls_requested=len(response.tool_calls), stop_reason=response.stop_reason,
            response_digest=rec.content(body), info=dict(response.info)))
        return response

    async def _tool_call(self, call: ToolCall, offered: frozenset[str]) -> ToolOutcome:
        engine, rec = self.engine, self.recorder
        args_digest = rec.content(_canonical_or_repr(call.arguments))
        checked = precheck(call, engine.tools, offered, self.tool_calls,
                           engine.settings.max_tool_calls)
        if isinstance(checked, ToolOutcome):
            outcome = checked
        else:
            rec.add(ToolCallStarted(
                turn_id=self.turn_id, session_id=self.session_id, tool_call_id=audit_name(call.id),
                tool_name=audit_name(call.name), triggered_by=self.message.source,
                caller_session_id=self.caller_session_id, args_sha256=args_digest))
            await rec.flush()  # the intent is on the record before the effect
            context = ToolContext(engine.ledger, self.turn_id, self.session_id,
                                  self.message.source, self.caller_session_id, call.id,
                                  engine.runtime_started_at)
            outcome = await execute(checked, call, context, engine.settings.tool_timeout_s)
            self.tools_used.append(call.name)
        self.tool_calls += 1
        event = ToolCallCompleted(
            turn_id=self.turn_id, session_id=self.session_id, tool_call_id=audit_name(call.id),
            tool_name=audit_name(call.name), triggered_by=self.message.source,
            caller_session_id=self.caller_session_id, tool_status=outcome.status,
            tool_duration_ms=outcome.duration_ms, exc_type=outcome.exc_type,
            args_sha256=args_digest, result_digest=rec.content(outcome.content),
            reason_code=outcome.reason_code)
        rec.add(event)
        if audit_log.isEnabledFor(logging.INFO):
            audit_log.info("overt.tool_called %s", canonical_json({
                "turn_id": self.turn_id, "session_id": self.session_id, **event.data()}))
        return outcome

    async def _finish(self, messages: list[Message], status: TurnStatus,
                      text: str = "") -> TurnOutcome:
        failed = status == "model_error"
        tools_used = None if failed else list(self.tools_used)
        error = self.error if failed else None
        if failed:
            text = "The model could not answer this time; the error is on the record."
        elif not text.strip():
            text = "(the model gave an empty answer)"
        self.recorder.add(TurnCompleted(
            turn_id=self.turn_id, session_id=self.session_id, status=status,
            reply_digest=self.recorder.content(text), tools_used=tools_used,
            tool_calls=self.tool_calls, model_calls=self.model_calls,
            input_tokens=self.usage.input_tokens, output_tokens=self.usage.output_tokens,
            cost_usd=self.usage.cost_usd, duration_ms=_ms_since(self.started),
            error_type=error.split(":")[1].strip() if error else None))
        await self.recorder.flush()
        if not failed:
            messages.append(Message("assistant", text))
        return TurnOutcome(self.result(text, tools_used, error), messages)


def _jsonable(value: object) -> object:
    """``value`` if it is JSON as it is, else its repr (malformed model output)."""
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


def audit_name(name: str) -> str:
    """A model-chosen tool name as the audit tier records it: printable, at most 128 chars.

    Registered names are already plain; this guards the record and the log line
    against an invented name carrying control characters or a whole paragraph.
    """
    if name.isidentifier() and len(name) <= 128:
        return name  # the usual case: a plain name, nothing to clean
    cleaned = _UNPRINTABLE.sub("?", name)
    return cleaned if len(cleaned) <= 128 else cleaned[:127] + "…"


def _canonical_or_repr(value: object) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return canonical_json(repr(value))


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
