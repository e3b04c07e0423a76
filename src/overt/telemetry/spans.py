"""OpenTelemetry spans from the ledger, following the GenAI semantic conventions.

One trace per turn::

    invoke_agent overt               turn.started .. turn.completed
    ├── chat {model}                 one per ``inference`` entry
    └── execute_tool {tool_name}     tool_call.started .. tool_call.completed

An entry records when it was committed (``at``) and how long its step took
(``duration_ms``, ``tool_duration_ms``); a span whose start was not recorded
starts at ``end - duration``. A turn with no ``turn.completed`` (the process
was killed, or the turn is still running) still gives its spans: they end at
the turn's last entry, with status error and ``error.type`` ``interrupted``. A
turn is exported whole when any of its entries falls in the ``since``/``until``
window.

Ids are derived from the turn id, the inference id and the tool call id
(SHA-256), so exporting the same turn twice gives the same trace and span ids,
and a collector de-duplicates. overt's own fields are namespaced ``overt.*``;
``overt.ledger.seq`` and ``overt.ledger.hash`` name the entry a span came from.
Never a content attribute: the audit tier has no content to give.

OpenTelemetry is an extra (``pip install 'overt[otel]'``), imported only when a
function here needs it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from overt.clock import parse_iso
from overt.errors import ExtraMissingError
from overt.events import (
    Event,
    InferenceRecorded,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnStarted,
)
from overt.ledger.base import Entry, Ledger
from overt.version import __version__

log = logging.getLogger("overt.telemetry")

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext
    from opentelemetry.util.types import AttributeValue

AGENT_NAME = "overt"

TURN_KINDS = frozenset({"turn.started", "inference", "tool_call.started",
                         "tool_call.completed", "turn.completed"})
# What a plugin did (hook.blocked, hook.reissued, ...) becomes an event on its turn's span.
HOOK_PREFIX = "hook."
_HOOK_ATTRIBUTES = ("plugin", "hook", "reason_code", "tool_name", "tool_call_id", "consequence",
                    "error_type", "from_model", "to_model", "iteration")


def is_turn_record(kind: str) -> bool:
    """Whether entries of ``kind`` belong in a turn's spans."""
    return kind in TURN_KINDS or kind.startswith(HOOK_PREFIX)
_IN_PROCESS_PROVIDERS = frozenset({"local", "scripted", "function"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
INTERRUPTED = "interrupted"


# -- JSON lines ---------------------------------------------------------------


def require_sdk() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise ExtraMissingError("otel", "opentelemetry-sdk") from exc


@dataclass(frozen=True, slots=True)
class EntryRecord:
    """An audit entry as the span builder reads it: the typed event
    and where it sits (its time, and on the record its ``seq`` and hash)."""

    event: Event
    at_ns: int
    seq: int | None = None
    hash: str | None = None

    @property
    def kind(self) -> str:
        return self.event.kind

    @classmethod
    def of_entry(cls, entry: Entry) -> EntryRecord:
        """Raises:
            EventDecodeError: the entry cannot be read back as its event.
        """
        return cls(entry.event(), at_ns(entry.at), entry.seq, entry.hash)


def at_ns(at: str) -> int:
    """A ledger timestamp as integer nanoseconds since the Unix epoch (exact).

    Raises:
        UsageError: ``at`` is not an ISO 8601 time.
    """
    delta = parse_iso(at) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _ms_ns(value: Any) -> int:
    return round(float(value) * 1_000_000) if isinstance(value, int | float) else 0


def _derived_id(key: str, size: int) -> int:
    """A non-zero id of ``size`` bytes derived from ``key`` (the same key, the same id)."""
    value = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:size], "big")
    return value or 1


def provider_of(model: str) -> str:
    """``gen_ai.provider.name`` for an overt model name: the part before ``:``."""
    return model.split(":", 1)[0] if model else "_OTHER"


def _put(attrs: dict[str, AttributeValue], key: str, value: Any) -> None:
    """Set ``key`` when ``value`` is a valid attribute value; lists become tuples of str
    (as the SDK stores them)."""
    if isinstance(value, str | bool | int | float):
        attrs[key] = value
    elif isinstance(value, list | tuple):
        attrs[key] = tuple(str(v) for v in value)


@functools.cache
def _resource(service_name: str) -> Resource:
    from opentelemetry.sdk.resources import Resource

    return Resource({"service.name": service_name})


@functools.cache
def _scope() -> InstrumentationScope:
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    return InstrumentationScope("overt.ledger.export", __version__)


@dataclass(slots=True)
class TurnSpans:
    """Builds the spans of one turn from its records, in ledger order.

    Children are emitted as soon as their record arrives (their parent's id is
    derived from the turn id); the ``invoke_agent`` span when the turn completes,
    or at :meth:`close` for an interrupted turn.
    """

    turn_id: str
    service_name: str
    started: EntryRecord | None = None
    began: TurnStarted | None = None
    completed: EntryRecord | None = None
    done: TurnCompleted | None = None
    session_id: str | None = None
    first_ns: int | None = None
    last_ns: int = 0
    last: EntryRecord | None = None
    open_tools: dict[str, list[tuple[EntryRecord, ToolCallStarted]]] = field(
        default_factory=dict)
    tool_spans: dict[str, int] = field(default_factory=dict)
    hook_records: list[EntryRecord] = field(default_factory=list)

    def add(self, rec: EntryRecord) -> list[ReadableSpan]:
        """Take one record; return the spans it finished."""
        if self.first_ns is None:
            self.first_ns = rec.at_ns
        self.last_ns = max(self.last_ns, rec.at_ns)
        self.last = rec
        self.session_id = self.session_id or rec.event.session_id
        match rec.event:
            case TurnStarted() as began:
                self.started, self.began = rec, began
            case InferenceRecorded() as inference:
                return [self._chat(rec, inference)]
            case ToolCallStarted() as call:
                self.open_tools.setdefault(call.tool_call_id, []).append((rec, call))
            case ToolCallCompleted() as ended:
                waiting = self.open_tools.get(ended.tool_call_id)
                return [self._tool(waiting.pop(0) if waiting else None, (rec, ended))]
            case TurnCompleted() as done:
                self.completed, self.done = rec, done
                return self._close()
            case _ if rec.kind.startswith(HOOK_PREFIX):
                self.hook_records.append(rec)
        return []

    def close(self) -> list[ReadableSpan]:
        """The spans still open: those of a turn that never completed."""
        return [] if self.completed is not None else self._close()

    # -- span construction --

    def _close(self) -> list[ReadableSpan]:
        spans = [self._tool(began, None) for waiting in self.open_tools.values()
                 for began in waiting]
        self.open_tools.clear()
        spans.append(self._turn())
        return spans

    def _context(self, key: str) -> SpanContext:
        from opentelemetry.trace import SpanContext, TraceFlags

        return SpanContext(_derived_id(f"overt.trace/{self.turn_id}", 16),
                           _derived_id(f"overt.span/{self.turn_id}/{key}", 8),
                           is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    def _start_after_turn(self, start: int) -> int:
        # Entry times and durations come from two clocks; keep children inside the turn.
        return max(start, self.started.at_ns) if self.started is not None else start

    def _base(self, operation: str, rec: EntryRecord | None) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {"gen_ai.operation.name": operation,
                                            "overt.turn_id": self.turn_id}
        _put(attrs, "gen_ai.conversation.id", self.session_id)
        if rec is not None:
            _put(attrs, "overt.ledger.seq", rec.seq)
            _put(attrs, "overt.ledger.hash", rec.hash)
        return attrs

    def _hook_events(self) -> list[Any]:
        """What plugins did in this turn, as span events (identifiers only, no digests)."""
        from opentelemetry.sdk.trace import Event as SpanEvent

        events = []
        for rec in self.hook_records:
            attrs: dict[str, AttributeValue] = {"overt.ledger.seq": rec.seq}
            for key in _HOOK_ATTRIBUTES:  # the hook classes' fields of these names, if any
                _put(attrs, f"overt.hook.{key}" if key in ("plugin", "hook") else f"overt.{key}",
                     getattr(rec.event, key, None))
            events.append(SpanEvent(rec.kind, attrs, rec.at_ns))
        return events

    def _span(self, name: str, key: str, kind_name: str, attrs: dict[str, AttributeValue],
              start: int, end: int, error: str | None) -> ReadableSpan:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanKind, Status, StatusCode

        if error is not None:
            attrs["error.type"] = error
        parent = None if key == "turn" else self._context("turn")
        return ReadableSpan(
            name, self._context(key), parent,
            resource=_resource(self.service_name),
            attributes=attrs, kind=SpanKind[kind_name],
            status=Status(StatusCode.ERROR, error) if error else Status(StatusCode.UNSET),
            start_time=min(start, end), end_time=end,
            events=self._hook_events() if key == "turn" else (),
            instrumentation_scope=_scope())

    def _turn(self) -> ReadableSpan:
        b, d = self.began, self.done
        end = self.completed.at_ns if self.completed is not None else self.last_ns
        if self.started is not None:
            start = self.started.at_ns
        elif d is not None:
            start = end - _ms_ns(d.duration_ms)
        else:
            start = self.first_ns if self.first_ns is not None else end
        attrs = self._base("invoke_agent", self.completed or self.last)
        attrs["gen_ai.agent.name"] = AGENT_NAME
        if b is not None:
            attrs["gen_ai.provider.name"] = provider_of(b.model)
            attrs["gen_ai.request.model"] = b.model
            _put(attrs, "overt.channel", b.source)
            _put(attrs, "overt.caller_session_id", b.caller_session_id)
            _put(attrs, "overt.route", b.route)
            _put(attrs, "overt.max_tool_calls", b.max_tool_calls)
        error: str | None = INTERRUPTED
        _put(attrs, "overt.turn_status", INTERRUPTED)
        if d is not None:
            _put(attrs, "gen_ai.usage.input_tokens", d.input_tokens)
            _put(attrs, "gen_ai.usage.output_tokens", d.output_tokens)
            _put(attrs, "overt.turn_status", d.status)
            _put(attrs, "overt.tool_calls", d.tool_calls)
            _put(attrs, "overt.model_calls", d.model_calls)
            _put(attrs, "overt.cost_usd", d.cost_usd)
            _put(attrs, "overt.tools_used", d.tools_used)
            error = None if d.status == "completed" else str(d.error_type or d.status)
        return self._span(f"invoke_agent {AGENT_NAME}", "turn", "INTERNAL", attrs, start, end,
                          error)

    def _chat(self, rec: EntryRecord, d: InferenceRecorded) -> ReadableSpan:
        model = d.model
        end = rec.at_ns
        start = self._start_after_turn(end - _ms_ns(d.duration_ms))
        provider = provider_of(model)
        attrs = self._base("chat", rec)
        attrs["gen_ai.provider.name"] = provider
        attrs["gen_ai.request.model"] = model
        attrs["gen_ai.response.model"] = model
        _put(attrs, "gen_ai.usage.input_tokens", d.input_tokens)
        _put(attrs, "gen_ai.usage.output_tokens", d.output_tokens)
        _put(attrs, "gen_ai.response.finish_reasons", [d.stop_reason])
        _put(attrs, "overt.inference_id", d.inference_id)
        _put(attrs, "overt.iteration", d.iteration)
        _put(attrs, "overt.route", d.route)
        _put(attrs, "overt.cost_usd", d.cost_usd)
        _put(attrs, "overt.escalated", d.escalated)
        _put(attrs, "overt.tools_offered", d.tools_offered)
        _put(attrs, "overt.tool_calls_requested", d.tool_calls_requested)
        kind = "INTERNAL" if provider in _IN_PROCESS_PROVIDERS else "CLIENT"
        key = f"chat/{d.inference_id or rec.seq}"
        return self._span(f"chat {model}".strip(), key, kind, attrs, start, end,
                          d.error_type or None)

    def _tool(self, began: tuple[EntryRecord, ToolCallStarted] | None,
              done: tuple[EntryRecord, ToolCallCompleted] | None) -> ReadableSpan:
        source = done or began
        assert source is not None  # one of the two is always given
        rec, d = source
        call_id = d.tool_call_id
        n = self.tool_spans.get(call_id, 0)
        self.tool_spans[call_id] = n + 1
        status: str = INTERRUPTED
        reason_code: str | None = None
        error: str | None = INTERRUPTED
        if done is not None:
            ended = done[1]
            end = done[0].at_ns
            start = began[0].at_ns if began is not None else end - _ms_ns(ended.tool_duration_ms)
            status, reason_code = ended.tool_status, ended.reason_code
            error = None if status == "ok" else str(ended.exc_type or status)
        else:
            end = self.completed.at_ns if self.completed is not None else self.last_ns
            start = rec.at_ns
        name = d.tool_name
        attrs = self._base("execute_tool", rec)
        attrs["gen_ai.tool.name"] = name
        attrs["gen_ai.tool.call.id"] = call_id
        attrs["gen_ai.tool.type"] = "function"
        _put(attrs, "overt.tool_status", status)
        _put(attrs, "overt.reason_code", reason_code)
        _put(attrs, "overt.channel", d.triggered_by)
        _put(attrs, "overt.caller_session_id", d.caller_session_id)
        return self._span(f"execute_tool {name}".strip(), f"tool/{call_id}/{n}", "INTERNAL",
                          attrs, self._start_after_turn(start), end, error)


def _by_turn(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """The entries spans are made from, grouped by turn in order of first appearance."""
    turns: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.turn_id and is_turn_record(entry.kind):
            turns.setdefault(entry.turn_id, []).append(entry)
    return turns


def _turn_order(span: ReadableSpan) -> tuple[int, int]:
    return (0 if span.parent is None else 1, span.start_time or 0)


def spans_from_entries(entries: Iterable[Entry], *,
                       service_name: str = AGENT_NAME) -> list[ReadableSpan]:
    """The spans of the turns in ``entries`` (any order; grouped by turn, each turn
    read in ``seq`` order). Entries without a turn id, and kinds no span is made
    from, are skipped. Each turn's spans come ``invoke_agent`` first, then by start.

    Raises:
        ExtraMissingError: opentelemetry-sdk is not installed.
    """
    require_sdk()
    spans: list[ReadableSpan] = []
    for turn_id, turn_entries in _by_turn(entries).items():
        builder = TurnSpans(turn_id, service_name)
        made: list[ReadableSpan] = []
        for entry in sorted(turn_entries, key=lambda e: e.seq):
            made += builder.add(EntryRecord.of_entry(entry))
        made += builder.close()
        spans += sorted(made, key=_turn_order)
    return spans


async def otel_spans(ledger: Ledger, *, session_id: str | None = None, since: str | None = None,
                     until: str | None = None,
                     service_name: str = AGENT_NAME) -> list[ReadableSpan]:
    """The spans of every turn with an entry matching the filters, each turn whole.

    Raises:
        ExtraMissingError: opentelemetry-sdk is not installed.
        LedgerError: the ledger cannot be read.
    """
    require_sdk()
    entries = await ledger.entries(session_id=session_id, since=since, until=until)
    whole: list[Entry] = []
    for turn_id, turn_entries in _by_turn(entries).items():
        kinds = {e.kind for e in turn_entries}
        if "turn.started" not in kinds or "turn.completed" not in kinds:
            # The window may have cut this turn: read all of it.
            turn_entries = await ledger.entries(turn_id=turn_id)
        whole += turn_entries
    return spans_from_entries(whole, service_name=service_name)


@dataclass(frozen=True, slots=True)
class OtelExportResult:
    """What :func:`export_otel` sent: turns, spans, and spans the exporter refused."""

    turns: int
    spans: int
    failed: int = 0


async def export_otel(ledger: Ledger, exporter: SpanExporter, *, session_id: str | None = None,
                      since: str | None = None, until: str | None = None,
                      batch_size: int = 512,
                      service_name: str = AGENT_NAME) -> OtelExportResult:
    """Export the spans of the matching turns through ``exporter``, in batches, on a
    worker thread (an exporter may do network I/O). The caller shuts the exporter
    down. A batch the exporter reports as failed is logged and counted, not raised.

    Raises:
        ExtraMissingError: opentelemetry-sdk is not installed.
        LedgerError: the ledger cannot be read.
    """
    require_sdk()
    from opentelemetry.sdk.trace.export import SpanExportResult

    spans = await otel_spans(ledger, session_id=session_id, since=since, until=until,
                             service_name=service_name)
    failed = 0
    for i in range(0, len(spans), batch_size):
        batch = spans[i:i + batch_size]
        result: SpanExportResult = await asyncio.to_thread(exporter.export, batch)
        if result is not SpanExportResult.SUCCESS:
            failed += len(batch)
            log.error("the span exporter refused a batch of %d spans", len(batch))
    await asyncio.to_thread(exporter.force_flush)
    turns = len({s.context.trace_id for s in spans if s.context is not None})
    return OtelExportResult(turns, len(spans) - failed, failed)


# -- exporters ----------------------------------------------------------------

