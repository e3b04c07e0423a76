"""``overt trail`` and ``overt export``: why the agent did what it did.

Attached by :mod:`overt.cli.main`: :func:`add_parsers` adds both commands,
:func:`run` runs one on an open ledger. ``overt ledger export`` (the whole
audit tier, without content) is another command, in :mod:`.export_cmd`.

Both read as an actor (``--as ACTOR``, default the operator): only sessions it
owns, unless it holds ``sessions.read_any`` (:mod:`overt.sessions.access`). A
session or turn it may not read is refused exactly as a missing one (exit 4,
the same message), and the refusal is recorded; a trail over a time window
shows only the turns of sessions it may read.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, TextIO

from overt.cli import flags
from overt.cli.flags import output_file, time_flag
from overt.errors import UsageError
from overt.events import REASONING_PHASES
from overt.ledger.base import Ledger
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.reasoning.export import jsonl_lines, markdown
from overt.reasoning.trail import (
    ApprovalRecord,
    DecisionRecord,
    Step,
    ToolCallRecord,
    Trail,
    TurnTrail,
    build_trail,
)
from overt.sessions.access import NO_TURN_OR_SESSION, Refused, SessionAccess

COMMANDS = ("trail", "export")
EXIT_OK = 0

_TIMES = ("times: an ISO 8601 time (2026-06-01, 2026-06-01T12:00:00Z), `today`, or a "
          "duration back from now: 90s, 15m, 24h, 7d, 2w.")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``trail`` and ``export`` to the top-level ``overt`` commands."""
    trail = sub.add_parser(
        "trail", help="a session's turns with their reasoning, tool calls, decisions, "
                      "approvals",
        description="The audit trail: every turn of a session (or every turn started in "
                    "--since/--until, across sessions) in order, each with its reasoning "
                    "steps, tool calls, policy decisions and approvals.",
        epilog=_TIMES + "\n\nexamples:\n  overt trail cli:01J...\n"
               "  overt trail --since 24h --phase error,waiting_approval",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    trail.add_argument("session_id", nargs="?", metavar="SESSION_ID", type=flags.session_id,
                       help="the session (optional with --since or --until)")
    trail.add_argument("--since", metavar="T", help="turns started from this time on")
    trail.add_argument("--until", metavar="T", help="turns started before this time")
    trail.add_argument("--phase", metavar="P[,P]",
                       help=f"only steps of these phases: {', '.join(REASONING_PHASES)}")
    trail.add_argument("--json", action="store_true")
    trail.add_argument("--as", dest="as_actor", metavar="ACTOR", type=flags.actor,
                       help="read as this actor (default: the operator): only its own "
                            "sessions, unless it holds sessions.read_any")

    export = sub.add_parser(
        "export", help="one turn's or session's reasoning as Markdown or JSON lines",
        description="A turn's or a session's reasoning steps: Markdown (one bracketed "
                    "paragraph per step, [思考] [計画] [承認待ち] [実行] [エラー] or their "
                    "English names) or JSON lines (one step per line). Carries the steps' "
                    "text; `overt ledger export` is the audit tier without content.")
    export.add_argument("id", metavar="TURN_ID|SESSION_ID", nargs="?",
                        type=flags.turn_or_session_id,
                        help="the turn or session (with --bundle: --session or --turn)")
    export.add_argument("--format", choices=("md", "jsonl"), default="md")
    export.add_argument("--labels", choices=("ja", "en"), default="ja",
                        help="Markdown step labels (default ja, as seed 004)")
    export.add_argument("--phase", metavar="P[,P]", help="only steps of these phases")
    export.add_argument("--output", metavar="PATH", help="write here instead of stdout")
    export.add_argument("--as", dest="as_actor", metavar="ACTOR", type=flags.actor,
                        help="read as this actor (default: the operator): only its own "
                             "sessions, unless it holds sessions.read_any")


async def run(args: argparse.Namespace, ledger: Ledger, *,
              capabilities: Capabilities | None = None, operator: Actor | None = None) -> int:
    """Run ``overt trail`` or ``overt export`` on ``ledger``, as ``--as`` or ``operator``
    (default ``operator:default``) under ``capabilities`` (default: the defaults).

    Raises:
        UsageError: bad arguments (an actor that is not ``KIND:NAME``).
        Refused: no such turn or session, or not one the actor may read (recorded).
        LedgerError: the ledger cannot be read.
        OSError: the output cannot be written.
    """
    phases = _phases(args.phase)
    actor = Actor.parse(args.as_actor) if args.as_actor else (operator or Actor.operator())
    access = SessionAccess(ledger, capabilities or Capabilities())
    if args.command == "trail":
        return await _trail(args, ledger, phases, actor, access)
    if args.id is None:
        raise UsageError("overt export needs a TURN_ID or SESSION_ID (or --bundle FILE)")
    if await access.turn_session(args.id) is not None:
        await access.turn(actor, args.id, surface="cli:export", message=NO_TURN_OR_SESSION)
        trail = await build_trail(ledger, turn_id=args.id, phases=phases)
    else:
        await access.session(actor, args.id, surface="cli:export",
                             message=NO_TURN_OR_SESSION)
        trail = await build_trail(ledger, session_id=args.id, phases=phases)
    if not trail.turns:  # pruned meanwhile
        raise Refused(NO_TURN_OR_SESSION)
    if args.output is None:
        _write(trail, args, sys.stdout)
    else:
        with output_file(args.output) as out:
            _write(trail, args, out)
    return EXIT_OK


def _phases(value: str | None) -> list[str] | None:
    return [p.strip() for p in value.split(",") if p.strip()] if value else None


def _write(trail: Trail, args: argparse.Namespace, out: TextIO) -> None:
    if args.format == "md":
        out.write(markdown(trail, args.labels))
    else:
        for line in jsonl_lines(trail):
            out.write(line + "\n")
    out.flush()


async def _trail(args: argparse.Namespace, ledger: Ledger, phases: list[str] | None,
                 actor: Actor, access: SessionAccess) -> int:
    since, until = time_flag(args.since, "--since"), time_flag(args.until, "--until")
    if args.session_id is None and since is None and until is None:
        raise UsageError("overt trail needs a SESSION_ID, --since or --until")
    if args.session_id is not None:
        await access.session(actor, args.session_id, surface="cli:trail")
    trail = await build_trail(ledger, session_id=args.session_id, since=since, until=until,
                              phases=phases)
    if args.session_id is None and not access.reads_any(actor):
        owners: dict[str, str | None] = {}
        for turn in trail.turns:
            if turn.session_id is not None and turn.session_id not in owners:
                owners[turn.session_id] = await access.owner_of(turn.session_id)
        trail = dataclasses.replace(trail, turns=[
            t for t in trail.turns
            if t.session_id is not None and owners[t.session_id] == str(actor)])
    if args.json:
        print(json.dumps({"session_id": trail.session_id, "since": since, "until": until,
                          "turns": [_turn_json(t) for t in trail.turns]},
                         ensure_ascii=False, indent=2))
    else:
        print(trail_text(trail))
    return EXIT_OK


def _turn_json(turn: TurnTrail) -> dict[str, Any]:
    out = {name: getattr(turn, name) for name in (
        "turn_id", "session_id", "started_at", "source", "model", "message", "status",
        "completed_at", "paused_on")}
    for name in ("steps", "tool_calls", "decisions", "approvals"):
        out[name] = [r._asdict() for r in getattr(turn, name)]
    return out


def trail_text(trail: Trail) -> str:
    """The trail for the terminal: a block per turn, its records in ledger order."""
    if not trail.turns:
        return "no turns in this trail"
    blocks = []
    for turn in trail.turns:
        state = turn.status or (f"paused on approval {turn.paused_on}" if turn.paused_on
                                else "in progress")
        lines = [f"turn {turn.turn_id}  {turn.started_at}  {turn.source or '?'}  "
                 f"session {turn.session_id}  {state}"]
        if turn.message is not None:
            lines.append(f"  asked: {_one_line(turn.message)}")
        for record in turn.records():
            lines.append("  " + _record_line(record))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _record_line(record: Step | ToolCallRecord | DecisionRecord | ApprovalRecord) -> str:
    if isinstance(record, Step):
        text = "(text pruned)" if record.content is None else _one_line(record.content)
        links = "".join(f"  {name} {value}" for name, value in (
            ("call", record.tool_call_id), ("decision", record.policy_decision_id),
            ("approval", record.approval_request_id)) if value is not None)
        return f"[{record.seq}] step {record.step_number} {record.phase}: {text}{links}"
    if isinstance(record, ToolCallRecord):
        why = f" [{record.reason_code}]" if record.reason_code else ""
        return (f"[{record.seq}] tool call {record.tool_call_id} {record.tool_name} -> "
                f"{record.status}{why}  {record.duration_ms:.1f} ms")
    if isinstance(record, DecisionRecord):
        return (f"[{record.seq}] policy {record.effect} {record.tool_name} "
                f"({record.tool_call_id}) rule {record.rule}: {record.reason_code}"
                + (f", {record.message}" if record.message else ""))
    decided = (f"{record.decision} by {record.decided_by} at {record.decided_at}"
               if record.decision else "open")
    return (f"[{record.seq}] {record.mode} {record.request_id} for {record.tool_name} "
            f"({record.tool_call_id}): {record.reason_code}; {decided}")


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


__all__ = ["COMMANDS", "add_parsers", "run", "trail_text"]
