"""The live bridge: an engine observer that turns events into spans without blocking.

:class:`OtelEventExporter` only enqueues; a background thread builds and exports
the same spans :mod:`overt.telemetry.spans` builds from the ledger.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING

from overt.events import Event
from overt.telemetry.spans import AGENT_NAME, EntryRecord, TurnSpans, is_turn_record, require_sdk

log = logging.getLogger("overt.telemetry")

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

_STOP = object()


class OtelEventExporter:
    """An engine observer that turns events into spans without ever blocking a turn.

    ``__call__`` only puts the event on a bounded queue; a daemon thread builds
    the spans (as :func:`spans_from_entries` would, timed by when each event was
    observed) and exports them in batches. When the queue is full the event is
    dropped and counted in :attr:`dropped`, with a WARNING when dropping starts;
    nothing is raised. A turn still open at :meth:`shutdown` is not exported.
    Register it with ``Engine(..., observers=[bridge])``.
    """

    def __init__(self, exporter: SpanExporter, *, max_queue: int = 2048, max_batch: int = 256,
                 max_open_turns: int = 1024, service_name: str = AGENT_NAME) -> None:
        """Start the worker thread that exports through ``exporter``.

        Raises:
            ExtraMissingError: opentelemetry-sdk is not installed.
        """
        require_sdk()
        self.exporter = exporter
        self.dropped = 0
        self.failed = 0
        self._max_batch = max_batch
        self._max_open_turns = max_open_turns
        self._service_name = service_name
        self._queue: queue.Queue[object] = queue.Queue(max_queue)
        self._turns: dict[str, TurnSpans] = {}
        self._dropping = False
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="overt-otel-export", daemon=True)
        self._thread.start()

    def __call__(self, event: Event) -> None:
        """Enqueue ``event``; never blocks, never raises."""
        item = (event, time.time_ns())
        with self._lock:
            if not self._closed and self._offer(item):
                self._dropping = False
                return
            self.dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning("otel export queue full or closed: dropping events "
                            "(%d dropped so far)", self.dropped)

    def _offer(self, item: object) -> bool:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            return False
        return True

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
        if not event.turn_id or not is_turn_record(event.kind):
            return []
        builder = self._turns.get(event.turn_id)
        if builder is None:
            if len(self._turns) >= self._max_open_turns:
                oldest = next(iter(self._turns))
                del self._turns[oldest]
                log.warning("otel export: more than %d open turns; turn %s dropped",
                            self._max_open_turns, oldest)
            builder = self._turns[event.turn_id] = TurnSpans(event.turn_id,
                                                              self._service_name)
        spans = builder.add(EntryRecord(event, observed_ns))
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

