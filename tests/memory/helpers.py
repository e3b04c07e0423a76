"""Calling memory tools directly, as the engine would, with a chosen actor and grants."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from overt.ledger.base import Ledger
from overt.memory.tools import memory_tools
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.tools.base import Tool, ToolContext
from tests.conftest import run

TOOLS: dict[str, Tool] = {t.name: t for t in memory_tools()}


def context(ledger: Ledger, actor: str = "agent:default",
            grants: Mapping[str, Sequence[str]] | None = None) -> ToolContext:
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
