"""Calling memory tools directly, as the engine would, with a chosen actor and grants."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from overt.events import ToolCallStarted
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.memory.tools import memory_tools
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.tools.base import Tool, ToolContext
from tests.conftest import run

TOOLS: dict[str, Tool] = {t.name: t for t in memory_tools()}


def start_call(ledger: Ledger, turn_id: str | None = "01TURN", session_id: str = "cli:s1",
               call_id: str = "call-1", tool: str = "node_create") -> None:
    """Record that tool call ``call_id`` started in ``turn_id`` (``None``: outside a
    turn), as the engine does before it runs a tool: a memory write naming the call
    is then one the chain shows it could have made (it never completes here)."""
    args = "{}"
    run(ledger.record([ToolCallStarted(
        turn_id=turn_id, session_id=session_id, tool_call_id=call_id, tool_name=tool,
        triggered_by="cli", caller_session_id="s1", args_sha256=digest_text(args))],
        {digest_text(args): args}))


def context(ledger: Ledger, actor: str = "agent:default",
            grants: Mapping[str, Sequence[str]] | None = None) -> ToolContext:
    """A tool context in call ``call-1`` of turn ``01TURN``, its start on the record."""
    start_call(ledger)
    return ToolContext(ledger, "01TURN", "cli:s1", "cli", "s1", "call-1", "2025-01-01T00:00:00Z",
                       Actor.parse(actor), Capabilities(grants))


def call(ctx: ToolContext, name: str, **arguments: Any) -> dict[str, Any]:
    answer: dict[str, Any] = run(TOOLS[name].run(arguments, ctx))
    return answer


def create(ctx: ToolContext, kind: str = "Note", title: str = "a title",
           body: str = "a body") -> dict[str, Any]:
    answer = call(ctx, "node_create", kind=kind, title=title, body=body)
    assert answer["ok"], answer
    node: dict[str, Any] = answer["node"]
    return node


def code(answer: dict[str, Any]) -> str:
    assert answer["ok"] is False, answer
    value: str = answer["error"]["code"]
    return value
