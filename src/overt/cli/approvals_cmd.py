"""``overt approvals``: the requests the gate held, and deciding them.

``list`` records the expiry of requests past their time first (so what it
shows is what the ledger says; it calls no model: ``expire`` or ``resume``
lets those turns answer); ``approve`` / ``deny`` decide one request and
take up what it held at once: the paused turn continues in this process and
its answer is printed. ``resume`` takes up decided requests whose process died
before it could; ``expire`` expires overdue requests and lets their turns answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from overt.cli import flags
from overt.engine.resume import Resumed
from overt.errors import ApprovalError, UsageError
from overt.policy.actors import Actor
from overt.policy.approvals import ApprovalRequest
from overt.runtime import Runtime
from overt.types import text_problem

EXIT_OK, EXIT_REFUSED = 0, 6


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    approvals = sub.add_parser("approvals", help="tool calls held for a human: list, decide")
    asub = approvals.add_subparsers(dest="approvals_command", required=True, metavar="COMMAND")
    ls = asub.add_parser("list", help="approval requests (pending first)")
    ls.add_argument("--all", action="store_true", help="also decided requests")
    ls.add_argument("--json", action="store_true")
    show = asub.add_parser("show", help="one request: the call, the rule, the decision")
    show.add_argument("request_id", type=flags.request_id)
    show.add_argument("--json", action="store_true")
    for name, text in (("approve", "approve a request: the held call runs once, the turn "
                        "answers"), ("deny", "deny a request: the turn answers without the call")):
        cmd = asub.add_parser(name, help=text)
        cmd.add_argument("request_id", type=flags.request_id)
        cmd.add_argument("--reason", help="why (recorded in the content tier)",
                         required=name == "deny")
        cmd.add_argument("--as", dest="actor", metavar="ACTOR", type=flags.actor,
                         help="decide as this actor (default operator:NAME from config)")
        cmd.add_argument("--json", action="store_true")
    for name, text in (("expire", "expire overdue requests; their turns answer without the call"),
                       ("resume", "take up decided requests nobody took up (after a crash)")):
        cmd = asub.add_parser(name, help=text)
        cmd.add_argument("--json", action="store_true")


async def run(args: argparse.Namespace, runtime: Runtime) -> int:
    command = args.approvals_command
    if command == "list":
        await runtime.expire_due(answer=False)
        requests = [r for r in await runtime.approvals.list()
                    if args.all or r.status == "pending" or r.interrupted or r.unstarted]
        requests.sort(key=lambda r: (r.status != "pending", r.requested_at))
        _out(args, [_dict(r) for r in requests], _table(requests))
        return EXIT_OK
    if command == "show":
        request = await runtime.approvals.get(args.request_id)
        reason = await runtime.approvals.reason(request)
        _out(args, {**_dict(request), "reason": reason}, _detail(request, reason))
        return EXIT_OK
    if command in ("approve", "deny"):
        if args.reason is not None and (problem := text_problem(args.reason)):
            raise UsageError(f"--reason: {problem}")  # before anything is decided
        actor = Actor.parse(args.actor) if args.actor else None
        decide = runtime.approve if command == "approve" else runtime.deny
        try:
            resumed = await decide(args.request_id, by=actor, reason=args.reason)
        except ApprovalError as exc:
            print(f"overt: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        _out(args, _resumed_dict(resumed), _resumed_text(resumed))
        return EXIT_OK
    done = await (runtime.expire_due() if command == "expire" else runtime.resume_pending())
    _out(args, [_resumed_dict(r) for r in done],
         "\n\n".join(_resumed_text(r) for r in done) or "nothing to do")
    return EXIT_OK


def _out(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2) if args.json else text)


def _dict(r: ApprovalRequest) -> dict[str, Any]:
    return {**{name: getattr(r, name) for name in r.__slots__}, "interrupted": r.interrupted,
            "unstarted": r.unstarted}


def _table(requests: list[ApprovalRequest]) -> str:
    if not requests:
        return "no approval requests waiting (--all shows decided ones)"
    lines = [f"{'REQUEST':26}  {'STATUS':8}  {'MODE':10}  {'TOOL':20}  {'SOURCE':8}  "
             f"{'REQUESTED':20}  EXPIRES"]
    for r in requests:
        lines.append(f"{r.request_id:26}  {r.status:8}  {r.mode:10}  {r.tool_name[:20]:20}  "
                     f"{r.source:8}  {r.requested_at[:19]:20}  {r.expires_at[:19]}")
        if r.interrupted:
            lines.append(f"{'':26}  ^ approved and started (entry {r.call_started_seq}), no "
                         "result recorded: `overt approvals resume` takes it up")
        if r.unstarted:
            lines.append(f"{'':26}  ^ approved and taken up (entry {r.taken_up_seq}), but its "
                         "call never started: the process that took it up stopped first "
                         "(nothing ran)")
    return "\n".join(lines)


def _detail(r: ApprovalRequest, reason: str | None) -> str:
    rows = [("request", r.request_id), ("status", r.status), ("mode", r.mode),
            ("tool", r.tool_name), ("tool call", r.tool_call_id), ("arguments", r.args_sha256),
            ("turn", r.turn_id or "(none: a call outside a turn)"), ("session", r.session_id),
            ("actor", r.actor), ("source", r.source), ("why held", r.reason_code),
            ("policy decision", r.decision_id), ("requested", r.requested_at),
            ("expires", r.expires_at), ("decided by", r.decided_by),
            ("decided at", r.decided_at), ("reason", reason), ("taken up", r.resumed)]
    return "\n".join(f"{k + ':':17}{v}" for k, v in rows if v is not None)


def _resumed_dict(resumed: Resumed) -> dict[str, Any]:
    return {"request": {**_dict(resumed.request), "interrupted": resumed.request.interrupted},
            "held_call": (None if resumed.held_call is None else
                          {"seq": resumed.held_call.seq, "kind": resumed.held_call.kind,
                           "data": resumed.held_call.data}),
            "result": resumed.result.to_dict() if resumed.result is not None else None,
            "released": ({name: getattr(resumed.released, name) for name in
                          ("tool_call_id", "status", "content", "is_error", "request_id")}
                         if resumed.released is not None else None),
            "handed_back": resumed.handed_back}


def _resumed_text(resumed: Resumed) -> str:
    r = resumed.request
    head = f"request {r.request_id}: {r.status} by {r.decided_by} ({r.tool_name})"
    if resumed.result is not None:
        result = resumed.result
        used = ", ".join(result.tools_used or []) or "(none)"
        return f"{head}\nturn {result.turn_id} answered:\n{result.text}\ntools used: {used}"
    if resumed.held_call is not None or (resumed.request.interrupted
                                         and resumed.released is None):
        record = resumed.held_call
        shown = json.dumps(record.data, sort_keys=True) if record is not None else "(not found)"
        return (f"{head}\nits call of {r.tool_name} started (entry "
                f"{r.call_started_seq}) and recorded no result; the tool is not idempotent, "
                f"so it is held for the operator and was not run again\n"
                f"tool_call.started: {shown}")
    if resumed.released is not None:
        return f"{head}\nthe held call ran: {resumed.released.status}\n{resumed.released.content}"
    if resumed.handed_back is not None:
        return f"{head}\n{resumed.handed_back}"
    if not r.pauses_turn:
        return f"{head}\nthe held call was closed without running"
    return f"{head}\n(the turn was taken up by another process; see overt show {r.turn_id})"
