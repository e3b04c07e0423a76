"""``overt ledger export``: the audit record as JSON lines or OpenTelemetry spans.

Attached under ``overt ledger`` by :mod:`overt.cli.main`: :func:`add_parser`
adds the subcommand, :func:`run` runs it on an open ledger.
"""

from __future__ import annotations

import argparse
import sys

from overt.cli import flags
from overt.cli.flags import output_file, time_flag
from overt.errors import UsageError
from overt.ledger.base import Ledger
from overt.ledger.export import export_jsonl
from overt.telemetry.exporters import EXPORTER_KINDS, make_span_exporter
from overt.telemetry.spans import export_otel

EXIT_OK, EXIT_USAGE, EXIT_EXPORT_FAILED = 0, 2, 5

DESCRIPTION = """\
Export the audit record: identifiers, statuses, token counts, durations and
hashes, never message text, tool arguments or tool results.

  jsonl  one audit entry per line (canonical JSON, in ledger order), with
         its prev_hash and hash, so the chain can be checked again elsewhere.
  otel   OpenTelemetry spans following the GenAI semantic conventions, one
         trace per turn: `invoke_agent overt` with a `chat {model}` child per
         model call and an `execute_tool {tool}` child per tool call. overt's
         own fields are namespaced `overt.*`. Span ids are derived from the
         ledger, so exporting a turn twice gives the same ids. A turn with no
         completion (process killed) ends at its last entry, with error
         `interrupted`. A turn is exported whole when any of its entries falls
         in the --since/--until window.
"""

EPILOG = """\
times: an ISO 8601 time (2025-06-01, 2025-06-01T12:00:00Z), `today` (since
midnight UTC), or a duration back from now: 90s, 15m, 24h, 7d, 2w.

examples:
  overt ledger export --since 24h > audit.jsonl
  overt ledger export --session cli:01J... --output session.jsonl
  overt ledger export --format otel                       # spans to stdout
  overt ledger export --format otel --exporter file --output spans.jsonl
  overt ledger export --format otel --exporter otlp \\
      --endpoint http://localhost:4318/v1/traces --since today

--format otel needs the otel extra: pip install 'overt[otel]'. The otlp
exporter without --endpoint follows the OTEL_EXPORTER_OTLP_* variables
(default http://localhost:4318/v1/traces).
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``export`` subcommand to ``subparsers`` (those of ``overt ledger``)."""
    p = subparsers.add_parser(
        "export", help="export the audit record as JSON lines or OpenTelemetry spans",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--session", metavar="ID", type=flags.session_id,
                   help="only this session (gen_ai.conversation.id)")
    p.add_argument("--since", metavar="T", help="from this time on (inclusive)")
    p.add_argument("--until", metavar="T", help="before this time (exclusive)")
    p.add_argument("--format", choices=("jsonl", "otel"), default="jsonl",
                   help="jsonl (default) or otel")
    p.add_argument("--exporter", choices=EXPORTER_KINDS, default=None,
                   help="otel only: console (default, to stdout), file (JSON lines of "
                        "spans to --output) or otlp (OTLP over HTTP)")
    p.add_argument("--output", metavar="PATH",
                   help="jsonl: write here instead of stdout; otel: the file exporter's path")
    p.add_argument("--endpoint", metavar="URL",
                   help="otlp only: the collector's traces URL")


def _check(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The window as ledger timestamps, after checking the flags go together.

    Raises:
        UsageError: a bad time, or flags that do not fit the format or exporter.
    """
    since, until = time_flag(args.since, "--since"), time_flag(args.until, "--until")
    if since is not None and until is not None and since >= until:
        raise UsageError(f"--since ({since}) must be before --until ({until})")
    if args.format == "jsonl":
        if args.exporter is not None or args.endpoint is not None:
            raise UsageError("--exporter and --endpoint are for --format otel")
        return since, until
    exporter = args.exporter or "console"
    if exporter == "file" and not args.output:
        raise UsageError("--exporter file needs --output PATH")
    if exporter != "file" and args.output:
        raise UsageError("--output with --format otel is for --exporter file")
    if exporter != "otlp" and args.endpoint:
        raise UsageError("--endpoint is for --exporter otlp")
    return since, until


async def run(args: argparse.Namespace, ledger: Ledger) -> int:
    """Run ``overt ledger export`` on ``ledger``; returns the exit code
    (0 ok, 2 bad arguments or a missing extra, 5 the span exporter failed).

    Raises:
        LedgerError: the ledger cannot be read.
        OSError: the output cannot be written.
    """
    try:
        since, until = _check(args)
    except UsageError as exc:
        print(f"overt: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "jsonl":
        return await _jsonl(ledger, args.session, since, until, args.output)
    try:
        exporter = make_span_exporter(args.exporter or "console", output=args.output,
                                      endpoint=args.endpoint, out=sys.stdout)
    except UsageError as exc:
        print(f"overt: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = await export_otel(ledger, exporter, session_id=args.session, since=since,
                                   until=until)
    finally:
        exporter.shutdown()
    print(f"overt: exported {result.spans} spans of {result.turns} turns", file=sys.stderr)
    if result.failed:
        print(f"overt: the {args.exporter or 'console'} exporter failed to send "
              f"{result.failed} spans", file=sys.stderr)
        return EXIT_EXPORT_FAILED
    return EXIT_OK


async def _jsonl(ledger: Ledger, session: str | None, since: str | None, until: str | None,
                 output: str | None) -> int:
    if output is None:
        count = await export_jsonl(ledger, sys.stdout, session_id=session, since=since,
                                   until=until)
    else:
        with output_file(output) as out:
            count = await export_jsonl(ledger, out, session_id=session, since=since,
                                       until=until)
    print(f"overt: exported {count} entries", file=sys.stderr)
    return EXIT_OK
