"""Export the audit tier: JSON lines, or OpenTelemetry spans.

Both read any :class:`~overt.ledger.base.Ledger` through ``entries()``, so they
work on every backend. Neither ever reads the content tier: what leaves is
identifiers, statuses, numbers and hashes, never message text, tool arguments
or tool results.

JSON lines
    One audit entry per line, :meth:`Entry.to_dict` in canonical JSON, in
    ``seq`` order: exactly the entries ``entries()`` returns for the filters.

OpenTelemetry spans (GenAI semantic conventions)
    One trace per turn::

        invoke_agent overt               turn.started .. turn.completed
        ├── chat {model}                 one per ``inference`` entry
        └── execute_tool {tool_name}     tool_call.started .. tool_call.completed

    An entry records when it was committed (``at``) and how long its step took
    (``duration_ms``, ``tool_duration_ms``); a span whose start was not
    recorded starts at ``end - duration``. A turn with no ``turn.completed``
    (the process was killed, or the turn is still running) still gives its
    spans: they end at the turn's last entry, with status error and
    ``error.type`` ``interrupted``. A turn is exported whole when any of its
    entries falls in the ``since``/``until`` window.

    Ids are derived from the turn id, the inference id and the tool call id
    (SHA-256), so exporting the same turn twice gives the same trace and span
    ids, and a collector de-duplicates. overt's own fields are namespaced
    ``overt.*``; ``overt.ledger.seq`` and ``overt.ledger.hash`` name the entry a
    span came from.

:class:`OtelEventExporter` is the live counterpart: an engine observer that
only enqueues, with a background thread building and exporting the same spans.

OpenTelemetry is an extra (``pip install 'overt[otel]'``), imported only when a
function here needs it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import queue
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

from overt import __version__
from overt.clock import parse_iso
from overt.errors import ExtraMissingError, UsageError
from overt.events import Event
from overt.ledger.base import Entry, Ledger
from overt.ledger.canonical import canonical_json

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext
    from opentelemetry.util.types import AttributeValue

log = logging.getLogger("overt.export")

AGENT_NAME = "overt"
EXPORTER_KINDS: tuple[str, ...] = ("console", "file", "otlp")

_TURN_KINDS = frozenset({"turn.started", "inference", "tool_call.started",
                         "tool_call.completed", "turn.completed"})
_IN_PROCESS_PROVIDERS = frozenset({"local", "scripted", "function"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
INTERRUPTED = "interrupted"


# -- JSON lines ---------------------------------------------------------------

async def export_jsonl(ledger: Ledger, out: TextIO, *, session_id: str | None = None,
                       since: str | None = None, until: str | None = None) -> int:
    """Write the audit entries matching the filters to ``out``, one canonical JSON
    object per line, in ``seq`` order. Returns how many were written.

    ``since`` is inclusive, ``until`` exclusive (ledger timestamps).

    Raises:
        LedgerError: the ledger cannot be read.
        OSError: ``out`` cannot be written.
    """
    entries = await ledger.entries(session_id=session_id, since=since, until=until)
    for entry in entries:
        out.write(canonical_json(entry.to_dict()))
        out.write("\n")
    out.flush()
    return len(entries)


# -- spans from records -------------------------------------------------------

def _require_sdk() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise ExtraMissingError("otel", "opentelemetry-sdk") from exc


@dataclass(frozen=True, slots=True)
class _Record:
    """An audit entry or a live event, as the span builder reads it."""

    kind: str
    at_ns: int
    turn_id: str
    session_id: str | None
    data: Mapping[str, Any]
    seq: int | None = None
    hash: str | None = None

    @classmethod
    def of_entry(cls, entry: Entry) -> _Record:
        return cls(entry.kind, at_ns(entry.at), entry.turn_id or "", entry.session_id,
                   entry.data, entry.seq, entry.hash)


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
class _TurnSpans:
    """Builds the spans of one turn from its records, in ledger order.

    Children are emitted as soon as their record arrives (their parent's id is
    derived from the turn id); the ``invoke_agent`` span when the turn completes,
    or at :meth:`close` for an interrupted turn.
    """

    turn_id: str
    service_name: str
    started: _Record | None = None
    completed: _Record | None = None
    session_id: str | None = None
    first_ns: int | None = None
    last_ns: int = 0
    last: _Record | None = None
    open_tools: dict[str, list[_Record]] = field(default_factory=dict)
    tool_spans: dict[str, int] = field(default_factory=dict)

    def add(self, rec: _Record) -> list[ReadableSpan]:
        """Take one record; return the spans it finished."""
        if self.first_ns is None:
            self.first_ns = rec.at_ns
        self.last_ns = max(self.last_ns, rec.at_ns)
        self.last = rec
        self.session_id = self.session_id or rec.session_id
        if rec.kind == "turn.started":
            self.started = rec
        elif rec.kind == "inference":
            return [self._chat(rec)]
        elif rec.kind == "tool_call.started":
            self.open_tools.setdefault(str(rec.data.get("tool_call_id")), []).append(rec)
        elif rec.kind == "tool_call.completed":
            waiting = self.open_tools.get(str(rec.data.get("tool_call_id")))
            began = waiting.pop(0) if waiting else None
            return [self._tool(began, rec)]
        elif rec.kind == "turn.completed":
            self.completed = rec
            return self._close()
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

    def _base(self, operation: str, rec: _Record | None) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {"gen_ai.operation.name": operation,
                                            "overt.turn_id": self.turn_id}
        _put(attrs, "gen_ai.conversation.id", self.session_id)
        if rec is not None:
            _put(attrs, "overt.ledger.seq", rec.seq)
            _put(attrs, "overt.ledger.hash", rec.hash)
        return attrs

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
            instrumentation_scope=_scope())

    def _turn(self) -> ReadableSpan:
        began, done = self.started, self.completed
        b = began.data if began is not None else {}
        d = done.data if done is not None else {}
        end = done.at_ns if done is not None else self.last_ns
        if began is not None:
            start = began.at_ns
        elif done is not None:
            start = end - _ms_ns(d.get("duration_ms"))
        else:
            start = self.first_ns if self.first_ns is not None else end
        attrs = self._base("invoke_agent", done or self.last)
        attrs["gen_ai.agent.name"] = AGENT_NAME
        model = b.get("model")
        if isinstance(model, str):
            attrs["gen_ai.provider.name"] = provider_of(model)
            attrs["gen_ai.request.model"] = model
        _put(attrs, "gen_ai.usage.input_tokens", d.get("input_tokens"))
        _put(attrs, "gen_ai.usage.output_tokens", d.get("output_tokens"))
        _put(attrs, "overt.channel", b.get("source"))
        _put(attrs, "overt.caller_session_id", b.get("caller_session_id"))
        _put(attrs, "overt.route", b.get("route"))
        _put(attrs, "overt.max_tool_calls", b.get("max_tool_calls"))
        _put(attrs, "overt.turn_status", d.get("status", INTERRUPTED))
        _put(attrs, "overt.tool_calls", d.get("tool_calls"))
        _put(attrs, "overt.model_calls", d.get("model_calls"))
        _put(attrs, "overt.cost_usd", d.get("cost_usd"))
        _put(attrs, "overt.tools_used", d.get("tools_used"))
        if done is None:
            error: str | None = INTERRUPTED
        elif d.get("status") != "completed":
            error = str(d.get("error_type") or d.get("status"))
        else:
            error = None
        return self._span(f"invoke_agent {AGENT_NAME}", "turn", "INTERNAL", attrs, start, end,
                          error)

    def _chat(self, rec: _Record) -> ReadableSpan:
        d = rec.data
        model = str(d.get("model") or "")
        end = rec.at_ns
        start = self._start_after_turn(end - _ms_ns(d.get("duration_ms")))
        provider = provider_of(model)
        attrs = self._base("chat", rec)
        attrs["gen_ai.provider.name"] = provider
        attrs["gen_ai.request.model"] = model
        attrs["gen_ai.response.model"] = model
        _put(attrs, "gen_ai.usage.input_tokens", d.get("input_tokens"))
        _put(attrs, "gen_ai.usage.output_tokens", d.get("output_tokens"))
        _put(attrs, "gen_ai.response.finish_reasons",
             [d["stop_reason"]] if isinstance(d.get("stop_reason"), str) else None)
        _put(attrs, "overt.inference_id", d.get("inference_id"))
        _put(attrs, "overt.iteration", d.get("iteration"))
        _put(attrs, "overt.route", d.get("route"))
        _put(attrs, "overt.cost_usd", d.get("cost_usd"))
        _put(attrs, "overt.escalated", d.get("escalated"))
        _put(attrs, "overt.tools_offered", d.get("tools_offered"))
        _put(attrs, "overt.tool_calls_requested", d.get("tool_calls_requested"))
        error = d.get("error_type")
        kind = "INTERNAL" if provider in _IN_PROCESS_PROVIDERS else "CLIENT"
        key = f"chat/{d.get('inference_id') or rec.seq}"
        return self._span(f"chat {model}".strip(), key, kind, attrs, start, end,
                          str(error) if error else None)

    def _tool(self, began: _Record | None, done: _Record | None) -> ReadableSpan:
        source = done or began
        assert source is not None  # one of the two is always given
        d = source.data
        call_id = str(d.get("tool_call_id"))
        n = self.tool_spans.get(call_id, 0)
        self.tool_spans[call_id] = n + 1
        if done is not None:
            end = done.at_ns
            start = began.at_ns if began is not None else \
                end - _ms_ns(done.data.get("tool_duration_ms"))
        else:
            end = self.completed.at_ns if self.completed is not None else self.last_ns
            start = source.at_ns
        name = str(d.get("tool_name") or "")
        attrs = self._base("execute_tool", source)
        attrs["gen_ai.tool.name"] = name
        attrs["gen_ai.tool.call.id"] = call_id
        attrs["gen_ai.tool.type"] = "function"
        status = d.get("tool_status") if done is not None else INTERRUPTED
        _put(attrs, "overt.tool_status", status)
        _put(attrs, "overt.reason_code", d.get("reason_code"))
        _put(attrs, "overt.channel", d.get("triggered_by"))
        _put(attrs, "overt.caller_session_id", d.get("caller_session_id"))
        error = None if status == "ok" else str(d.get("exc_type") or status)
        return self._span(f"execute_tool {name}".strip(), f"tool/{call_id}/{n}", "INTERNAL",
                          attrs, self._start_after_turn(start), end, error)


def _by_turn(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """The entries spans are made from, grouped by turn in order of first appearance."""
    turns: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.turn_id and entry.kind in _TURN_KINDS:
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
    _require_sdk()
    spans: list[ReadableSpan] = []
    for turn_id, turn_entries in _by_turn(entries).items():
        builder = _TurnSpans(turn_id, service_name)
        made: list[ReadableSpan] = []
        for entry in sorted(turn_entries, key=lambda e: e.seq):
            made += builder.add(_Record.of_entry(entry))
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
    _require_sdk()
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
    _require_sdk()
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

def _file_exporter(path: str | Path, append: bool) -> SpanExporter:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class FileSpanExporter(SpanExporter):
        """Appends each span as one line of JSON (the SDK's span dict) to a file."""

        def __init__(self, path: str | Path, *, append: bool = False) -> None:
            self.path = Path(path)
            self._file: IO[str] | None = self.path.open("a" if append else "w",
                                                        encoding="utf-8")
            self._lock = threading.Lock()

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            with self._lock:
                if self._file is None:
                    return SpanExportResult.FAILURE
                for span in spans:
                    self._file.write(span_json(span))
                    self._file.write("\n")
                self._file.flush()
            return SpanExportResult.SUCCESS

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

        def shutdown(self) -> None:
            with self._lock:
                if self._file is not None:
                    self._file.close()
                    self._file = None

    return FileSpanExporter(path, append=append)


def span_json(span: ReadableSpan) -> str:
    """One span as compact JSON (the SDK's span dict, as the console exporter prints it)."""
    return str(span.to_json(indent=None))


def make_span_exporter(kind: str, *, output: str | Path | None = None,
                       endpoint: str | None = None, out: TextIO | None = None,
                       append: bool = False) -> SpanExporter:
    """A span exporter: ``console`` (to ``out``, default stdout), ``file`` (JSON lines
    to ``output``) or ``otlp`` (OTLP over HTTP to ``endpoint``; without one, the
    exporter's own default and ``OTEL_EXPORTER_OTLP_*`` settings apply).

    Raises:
        UsageError: an unknown kind, or ``file`` without ``output``.
        ExtraMissingError: the OpenTelemetry packages are not installed.
    """
    _require_sdk()
    if kind == "console":
        import sys

        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=out if out is not None else sys.stdout)
    if kind == "file":
        if output is None:
            raise UsageError("the file exporter needs an output path")
        return _file_exporter(output, append)
    if kind == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ExtraMissingError("otel", "opentelemetry-exporter-otlp-proto-http") from exc
        return OTLPSpanExporter(endpoint=endpoint)
    raise UsageError(f"unknown span exporter {kind!r}: one of {', '.join(EXPORTER_KINDS)}")


# -- the live bridge ----------------------------------------------------------

_STOP = object()


class OtelEventExporter:
    """An engine observer that turns events into spans without ever blocking a turn.

    ``__call__`` only puts the event on a bounded queue; a daemon thread builds
    the spans (as :func:`spans_from_entries` would, timed by when each event was
    observed) and exports them in batches. When the queue is full the event is
    dropped and counted in :attr:`dropped`, with a WARNING when dropping starts;
    nothing is raised. A turn still open at :meth:`shutdown` is not exported.

    Raises (constructor):
        ExtraMissingError: opentelemetry-sdk is not installed.
    """

    def __init__(self, exporter: SpanExporter, *, max_queue: int = 2048, max_batch: int = 256,
                 max_open_turns: int = 1024, service_name: str = AGENT_NAME) -> None:
        _require_sdk()
        self.exporter = exporter
        self.dropped = 0
        self.failed = 0
        self._max_batch = max_batch
        self._max_open_turns = max_open_turns
        self._service_name = service_name
        self._queue: queue.Queue[object] = queue.Queue(max_queue)
        self._turns: dict[str, _TurnSpans] = {}
        self._dropping = False
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="overt-otel-export", daemon=True)
        self._thread.start()

    def __call__(self, event: Event) -> None:
        """Enqueue ``event``; never blocks, never raises."""
        item = (event, time.time_ns())
        with self._lock:
            if not self._closed:
                try:
                    self._queue.put_nowait(item)
                except queue.Full:
                    pass
                else:
                    self._dropping = False
                    return
            self.dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning("otel export queue full or closed: dropping events "
                            "(%d dropped so far)", self.dropped)

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every event enqueued before this call has been exported."""
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout_s)
        except queue.Full:
            return False
        return done.wait(timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Export what is queued, stop the thread, shut the exporter down."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            log.warning("otel export queue still full after %.1fs: stopping without it",
                        timeout_s)
        self._thread.join(timeout_s)
        if self._turns:
            log.warning("otel export: %d turns still open at shutdown were not exported",
                        len(self._turns))
        if self.dropped:
            log.warning("otel export: %d events were dropped in all", self.dropped)
        self.exporter.shutdown()

    # -- the worker thread --

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while len(items) < self._max_batch:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            spans: list[ReadableSpan] = []
            flushes: list[threading.Event] = []
            stop = False
            for item in items:
                if item is _STOP:
                    stop = True
                elif isinstance(item, threading.Event):
                    flushes.append(item)
                elif isinstance(item, tuple):
                    spans += self._spans_for(item[0], item[1])
            if spans:
                self._export(spans)
            for flushed in flushes:
                flushed.set()
            if stop:
                return

    def _spans_for(self, event: Event, observed_ns: int) -> list[ReadableSpan]:
        if not event.turn_id or event.kind not in _TURN_KINDS:
            return []
        builder = self._turns.get(event.turn_id)
        if builder is None:
            if len(self._turns) >= self._max_open_turns:
                oldest = next(iter(self._turns))
                del self._turns[oldest]
                log.warning("otel export: more than %d open turns; turn %s dropped",
                            self._max_open_turns, oldest)
            builder = self._turns[event.turn_id] = _TurnSpans(event.turn_id,
                                                              self._service_name)
        spans = builder.add(_Record(event.kind, observed_ns, event.turn_id, event.session_id,
                                    event.data()))
        if builder.completed is not None:
            del self._turns[event.turn_id]
        return spans

    def _export(self, spans: list[ReadableSpan]) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.exporter.export(spans)
        except Exception as exc:  # noqa: BLE001  an exporter failure must not kill the thread
            result = SpanExportResult.FAILURE
            log.error("otel export failed: %s: %s", type(exc).__name__, exc)
        if result is not SpanExportResult.SUCCESS:
            self.failed += len(spans)
            log.warning("otel export: %d spans not exported (%d in all)", len(spans),
                        self.failed)
