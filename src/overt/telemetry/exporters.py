"""Where spans go: the console, a file of JSON lines, or an OTLP collector."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, TextIO

from overt.errors import ExtraMissingError, UsageError
from overt.telemetry.spans import require_sdk

log = logging.getLogger("overt.telemetry")

EXPORTER_KINDS: tuple[str, ...] = ("console", "file", "otlp")

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

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
    require_sdk()
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
