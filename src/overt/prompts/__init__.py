"""The system prompt shipped with overt, and how it is rendered.

The prompt says what the agent may actually do: which tools only read, which
change things and run without asking (the agent's own append-only memory,
under the default policy), which wait for the operator's approval and which
are refused. That part is built from the gate's decisions for the tools
offered (:func:`permissions`), never written by hand, so a policy that holds
memory writes for approval, or allows a mutating plugin tool, is told to the
model as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Literal

from overt.errors import ConfigError
from overt.policy.actors import Actor
from overt.policy.capabilities import tool_capability
from overt.policy.gate import Gate
from overt.tools.registry import ToolRegistry
from overt.types import ToolSpec

Standing = Literal["read", "write", "approval", "denied"]
"""What the gate does with a call to a tool: ``read`` (allowed, changes nothing),
``write`` (allowed, changes something), ``approval`` (held for the operator),
``denied``."""


@dataclass(frozen=True, slots=True)
class Permission:
    """One tool's standing under the policy in force, with the gate's reason."""

    standing: Standing
    reason_code: str


ROUTING: dict[str, str] = {
    "get_usage": "Tokens, cost, spend, burn, usage (トークン, コスト, 料金, 使用量): `get_usage`. "
                 "Its period is today unless the operator names another: yesterday (the day "
                 "before today), 24h, 7d (this week, "
                 "last 7 days), 30d (this month, last 30 days), all (in total, ever). For one "
                 "model's, route's, day's or session's share, or a breakdown per one of them, "
                 "set `by` to model, route, day or session.",
    "get_operational_state": "Health, uptime, since when running, when the ledger started, "
                             "the last error, turns and tool calls today, approvals waiting "
                             "(稼働状況, エラー, 承認待ち): `get_operational_state`.",
    "node_create": "\"Remember\", \"note\", \"save\", \"keep in mind\", \"don't forget\" "
                   "a fact the operator tells you (覚えておいて, メモして): `node_create`.",
    "node_search": "\"What is…\", \"what did we decide…\", \"what do we know about…\" "
                   "something stored in memory (a host, a port, an owner, a decision, a ticket; "
                   "覚えてる？): `node_search` with its key words. Never answer those from "
                   "nothing.",
    "node_supersede": "\"Update\", \"it changed\" about a node whose id is in the "
                      "conversation: `node_supersede` with that id.",
    "link_create": "\"Link\" two nodes whose ids are in the conversation: `link_create`.",
}
"""Which question goes to which built-in tool: a line per tool offered (``$routing``);
worded from operators' questions, English and Japanese, and kept by the eval suite."""
NO_TOOL = ("Greetings, thanks, arithmetic, unit conversions, explaining what a term means, "
           "code: no tool. Answer directly.")


def default_template() -> str:
    """The shipped system prompt template (``$tools``, ``$routing``, ``$permissions``,
    ``$max_tool_calls``)."""
    return resources.files("overt.prompts").joinpath("system.md").read_text(encoding="utf-8")


def load_template(path: str | Path | None) -> str:
    """The template at ``path``, or the shipped one when ``path`` is None.

    Raises:
        ConfigError: the file cannot be read.
    """
    if path is None:
        return default_template()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read system prompt {path}: {exc}") from exc


def permissions(gate: Gate, registry: ToolRegistry, *, actor: Actor, route: str,
                source: str = "cli") -> dict[str, Permission]:
    """Each offered tool's standing for ``actor`` on ``route`` and ``source``, as the
    gate decides a call with no arguments (a rule conditioned on arguments may still
    decide a real call otherwise; the tool's result then says so)."""
    out: dict[str, Permission] = {}
    for spec in registry.specs():
        tool = registry.get(spec.name)
        mutating = not (tool.read_only if tool is not None else spec.read_only)
        capability = tool_capability(spec.name, tool.capability if tool is not None else None)
        held = gate.capabilities.check(actor, capability)
        if not held.granted:
            out[spec.name] = Permission("denied", "capability_missing")
            continue
        decision = gate.policy.decide(spec.name, {}, source=source, route=route,
                                      actor=str(actor), mutating=mutating)
        standing: Standing = (
            "denied" if decision.effect == "deny"
            else "approval" if decision.effect in ("ask", "quarantine")
            else "write" if mutating else "read")
        out[spec.name] = Permission(standing, decision.reason_code)
    return out


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def permission_lines(tools: Sequence[ToolSpec], allowed: Mapping[str, Permission]) -> str:
    """What the agent may do with ``tools``, one line per standing present."""
    by: dict[Standing, list[str]] = {"read": [], "write": [], "approval": [], "denied": []}
    for spec in tools:
        permission = allowed.get(spec.name)
        by[permission.standing if permission else "read" if spec.read_only
           else "approval"].append(spec.name)
    lines = []
    if by["read"]:
        lines.append(f"- You may read freely: {_names(by['read'])}.")
    if by["write"]:
        memory = all(allowed[n].reason_code == "memory_append_only" for n in by["write"])
        lines.append(f"- You may change, without asking: {_names(by['write'])}."
                     + (" Your memory is yours to write: when the operator asks you to "
                        "remember, note or update something, write it; a revision never "
                        "erases the one before." if memory else ""))
    if by["approval"]:
        lines.append(f"- These change things and wait for the operator's approval before "
                     f"they run; call them when asked, and say the change is waiting for "
                     f"approval: {_names(by['approval'])}.")
    if by["denied"]:
        lines.append(f"- Not allowed here: {_names(by['denied'])}.")
    if not lines:
        lines.append("- You have no tools in this conversation.")
    return "\n".join(lines)


def _summary(description: str) -> str:
    """The description's first sentence: the schemas sent with the request carry the rest."""
    head, dot, _ = description.partition(". ")
    return head + ("." if dot or not head.endswith(".") else "")


def render(template: str, tools: tuple[ToolSpec, ...], max_tool_calls: int,
           allowed: Mapping[str, Permission] | None = None) -> str:
    """The system prompt for a turn offering ``tools``, under ``allowed`` (the gate's
    standing per tool; None: read-only tools read, every other tool waits for approval)."""
    lines = [f"- `{t.name}`: {_summary(t.description)}" for t in tools] \
        or ["(no tools are offered)"]
    routing = [f"- {ROUTING[t.name]}" for t in tools if t.name in ROUTING] + [f"- {NO_TOOL}"]
    return Template(template).safe_substitute(
        tools="\n".join(lines), max_tool_calls=str(max_tool_calls), routing="\n".join(routing),
        permissions=permission_lines(tools, allowed or {}))
