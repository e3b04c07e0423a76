"""Text renderings of ledger records for the terminal."""

from __future__ import annotations

import json
from typing import Any

from overt.errors import EventDecodeError
from overt.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    HookBlocked,
    HookDeclined,
    HookError,
    HookProvided,
    HookReissued,
    HookRequestRewritten,
    HookToolsNarrowed,
    HookTransformed,
    InferenceRecorded,
    PolicyDecided,
    ReasoningStepRecorded,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnPaused,
    TurnResumed,
    TurnStarted,
)
from overt.hooks.manager import PluginInfo
from overt.ledger.base import Entry, Ledger, TurnSummary, UsageRow, VerifyReport


def _ms(value: Any) -> str:
    return f"{value:.1f} ms" if isinstance(value, int | float) else "-"


def runs_table(turns: list[TurnSummary]) -> str:
    if not turns:
        return "no turns recorded yet"
    lines = [f"{'turn id':26}  {'started (UTC)':24}  {'source':8}  {'status':17}  "
             f"{'duration':>11}  tools"]
    for t in turns:
        tools = "-" if t.tools_used is None else (", ".join(t.tools_used) or "(none)")
        lines.append(f"{t.turn_id:26}  {t.at:24}  {t.source:8}  {t.status or 'in progress':17}  "
                     f"{_ms(t.duration_ms):>11}  {tools}")
    return "\n".join(lines)


def turn_record(entries: list[Entry], contents: dict[str, str | None]) -> str:
    """The full record of one turn; ``contents`` maps digests to bodies when asked for."""
    out: list[str] = []

    def body(label: str, digest: str | None) -> None:
        if digest is not None and digest in contents:
            text = contents[digest]
            shown = "(pruned or never stored)" if text is None else text
            out.append(f"    {label}: {shown}")

    started = {e.event(ToolCallStarted).tool_call_id for e in entries
               if e.kind == ToolCallStarted.kind}
    for e in entries:
        try:
            event: Event | None = e.event()
        except EventDecodeError:
            event = None  # a kind or shape this version does not know: shown field by field
        match event:
            case TurnStarted() as d:
                out.append(f"turn {e.turn_id}")
                out.append(f"  session      {e.session_id}")
                out.append(f"  source       {d.source} ({d.caller_session_id})")
                out.append(f"  model        {d.model}  route {d.route}  "
                           f"max tool calls {d.max_tool_calls}")
                out.append(f"  started      {e.at}")
                body("message", d.message_digest)
            case InferenceRecorded() as d:
                status = f"error {d.error_type}" if d.error_type else d.stop_reason
                out.append(f"  [{e.seq}] inference #{d.iteration}  {d.model}  {status}  "
                           f"in {d.input_tokens} / out {d.output_tokens} tokens  "
                           f"${d.cost_usd:.6f}  {_ms(d.duration_ms)}")
                offered = ", ".join(d.tools_offered) or "(none)"
                out.append(f"        tools offered: {offered}; tool calls asked: "
                           f"{d.tool_calls_requested}")
                if d.info:
                    out.append("        " + "  ".join(f"{k}={v}"
                                                      for k, v in sorted(d.info.items())))
                if d.adapter_decisions:
                    out.append("        adapter decided: " + ", ".join(d.adapter_decisions))
                if d.request_digest is None and contents:
                    out.append("    request: (not recorded: this inference predates "
                               "request recording)")
                body("request", d.request_digest)
                body("response", d.response_digest)
            case ToolCallStarted() as d:
                out.append(f"  [{e.seq}] tool call {d.tool_call_id} {d.tool_name} started  "
                           f"args {d.args_sha256[:19]}…")
                body("arguments", d.args_sha256)
            case ToolCallCompleted() as d:
                exc = f" ({d.exc_type})" if d.exc_type else ""
                reason = f" [{d.reason_code}]" if d.reason_code else ""
                by = f"  provided by plugin {d.provided_by}" if d.provided_by else ""
                out.append(f"  [{e.seq}] tool call {d.tool_call_id} {d.tool_name} -> "
                           f"{d.tool_status}{exc}{reason}  {_ms(d.tool_duration_ms)}{by}")
                if d.tool_status != "ok" or d.tool_call_id not in started:
                    body("arguments", d.args_sha256)
                body("result", d.result_digest)
            case TurnCompleted() as d:
                used = "(absent)" if d.tools_used is None else (", ".join(d.tools_used) or "[]")
                out.append(f"  [{e.seq}] turn {d.status}  {_ms(d.duration_ms)}  "
                           f"model calls {d.model_calls}  tool calls {d.tool_calls}  "
                           f"tokens in {d.input_tokens} / out {d.output_tokens}  "
                           f"${d.cost_usd:.6f}")
                out.append(f"        tools used: {used}")
                body("reply", d.reply_digest)
            case ReasoningStepRecorded() as d:
                links = "".join(f"  {name} {value}" for name, value in (
                    ("call", d.tool_call_id), ("decision", d.policy_decision_id),
                    ("approval", d.approval_request_id)) if value)
                out.append(f"  [{e.seq}] step {d.step_number} {d.phase}{links}")
                body("text", d.content_digest)
            case PolicyDecided() as d:
                cap = "" if d.capability_granted else f"  lacks {d.capability}"
                out.append(f"  [{e.seq}] policy {d.effect} {d.tool_name} "
                           f"({d.tool_call_id}) [{d.reason_code}] rule {d.rule}  "
                           f"actor {d.actor}  path {d.path}{cap}")
                out.append(f"        rules evaluated: {', '.join(d.rules_evaluated)}")
            case ApprovalRequested() as d:
                out.append(f"  [{e.seq}] approval requested {d.request_id} ({d.mode}) for "
                           f"{d.tool_name}  expires {d.expires_at}")
            case ApprovalDecided() as d:
                out.append(f"  [{e.seq}] approval {d.request_id} {d.decision} by "
                           f"{d.decided_by}")
                body("reason", d.reason_digest)
            case TurnPaused() as d:
                out.append(f"  [{e.seq}] turn paused, waiting for approval {d.request_id}")
            case TurnResumed() as d:
                out.append(f"  [{e.seq}] turn resumed ({d.decision}) by {d.resumed_by} "
                           f"in pid {d.pid} on {d.host}")
            case (HookBlocked() | HookProvided() | HookDeclined() | HookRequestRewritten()
                  | HookToolsNarrowed() | HookReissued() | HookTransformed()
                  | HookError()) as d:
                out.append(f"  [{e.seq}] {e.kind} by plugin {d.plugin} in {d.hook}"
                           + _details(e.data, skip=("plugin", "hook")))
                if isinstance(d, HookReissued):
                    body("context", d.context_digest)
                elif isinstance(d, HookError):
                    body("error", d.error_digest)
                elif isinstance(d, HookTransformed):
                    body("after", d.after_digest)
            case _:
                out.append(f"  [{e.seq}] {e.kind}" + _details(e.data))
    return "\n".join(out)


def _details(data: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """The remaining fields of an entry, as ``key=value`` (digests shortened)."""
    parts = []
    for key, value in sorted(data.items()):
        if key in skip or value is None:
            continue
        if isinstance(value, str) and value.startswith("sha256:"):
            value = value[:19] + "…"
        parts.append(f"{key}={value}")
    return ("  " + "  ".join(parts)) if parts else ""


def verify_text(report: VerifyReport) -> str:
    if report.ok:
        head = report.head_hash or "-"
        return (f"ok: {report.entries} entries verified (seq {report.first_seq or 0}.."
                f"{report.last_seq or 0}), {report.content_checked} content bodies match "
                f"their digests\nhead {head}")
    if report.index_bad:
        return (f"FAILED: {report.problem} (the chain itself verified: {report.entries} "
                "entries; the trail index is derived from it and disagrees)")
    if report.memory_bad:
        return (f"FAILED: {report.problem} (the chain itself verified: {report.entries} "
                "entries; the memory tables beside it disagree with it)")
    if report.bad_seq is not None:
        return (f"FAILED at entry seq {report.bad_seq}: {report.problem} "
                f"({report.entries} entries before it verified)")
    return f"FAILED: {report.problem}"


def plugins_table(infos: list[PluginInfo]) -> str:
    """``overt plugins``: one block per plugin."""
    if not infos:
        return "no plugins installed"
    lines = []
    for p in infos:
        lines.append(f"{p.name}  [{p.status}]  {p.source}")
        if p.error:
            lines.append(f"    cannot be loaded: {p.error}")
        else:
            lines.append(f"    hooks: {', '.join(p.hooks) or '(none)'}")
    lines.append("")
    lines.append("enable with OVERT_PLUGINS_ENABLED=NAME,... or --enable-plugin NAME")
    return "\n".join(lines)


def usage_table(rows: list[UsageRow], groups: tuple[str, ...], *, since: str | None) -> str:
    """The burn: one line per group, and a total."""
    header = f"usage since {since or 'the start of the ledger'}"
    if not rows:
        return f"{header}: no model calls"
    names = {"route": 14, "model": 44, "day": 10, "session": 32}
    lines = [header, "  ".join(f"{g:<{names[g]}}" for g in groups)
             + f"  {'calls':>6}  {'tokens in':>10}  {'tokens out':>10}  {'cost USD':>12}"]
    for r in rows:
        lines.append("  ".join(f"{getattr(r, g):<{names[g]}}" for g in groups)
                     + f"  {r.inferences:>6}  {r.input_tokens:>10,}  {r.output_tokens:>10,}"
                     f"  {r.cost_usd:>12.6f}")
    total_in = sum(r.input_tokens for r in rows)
    total_out = sum(r.output_tokens for r in rows)
    width = sum(names[g] for g in groups) + 2 * (len(groups) - 1)
    lines.append(f"{'total':>{width}}  "
                 f"{sum(r.inferences for r in rows):>6}  {total_in:>10,}  {total_out:>10,}"
                 f"  {sum(r.cost_usd for r in rows):>12.6f}")
    return "\n".join(lines)


async def request_text(ledger: Ledger, body: str | None) -> str | None:
    """A stored request body as the request that was sent (its parts read back), as
    indented JSON; the body as it is when a part is missing."""
    from overt.engine.request_body import PartMissing, expand

    if body is None:
        return None
    try:
        request = await expand(body, ledger.content)
    except (PartMissing, ValueError, KeyError) as exc:
        return f"{body}\n    (parts not readable: {type(exc).__name__} {exc})"
    return json.dumps(request, ensure_ascii=False, indent=2).replace("\n", "\n    ")
