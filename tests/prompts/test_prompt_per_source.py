"""The system prompt a turn sends is rendered for the source its message came from, and
what it promises about each tool is what the gate then does with a call to it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from overt.hooks import PluginHost
from overt.models.fake import FunctionModel, Reply
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.tools.base import ToolContext, tool
from overt.types import SOURCES, IncomingMessage, ModelRequest
from tests.conftest import run


@tool()
async def restart_worker(ctx: ToolContext, name: str) -> str:
    """Restart a worker."""
    return f"restarted {name}"


CALLED = ("get_usage", "node_create", "restart_worker")  # a held call pauses the turn: last
ARGUMENTS: dict[str, dict[str, Any]] = {
    "restart_worker": {"name": "w1"},
    "node_create": {"kind": "Note", "title": "t", "body": "b"},
    "get_usage": {},
}

PROMISES = {
    "You may read freely": "allow",
    "You may change, without asking": "allow",
    "wait for the operator's approval": "ask",
    "Not allowed here": "deny",
}
"""The prompt's line that names a tool, and the gate effect it promises."""


def message(source: str) -> IncomingMessage:
    metadata = {"cli": {"session_id": "s1"}, "http": {"request_id": "r1"},
                "slack_dm": {"channel_id": "D1", "event_ts": "1.0"},
                "email": {"message_id": "<m1@example.org>"},
                "mcp": {"caller_actor_kind": "mcp_client", "tool_name": "ask"}}[source]
    return IncomingMessage(source, "restart w1, note it, and how much did we spend?",
                           metadata)


def promised(prompt: str, name: str) -> str:
    """The gate effect the prompt's ``## What you may do`` promises for ``name``."""
    section = prompt.split("## What you may do", 1)[1].split("##", 1)[0]
    lines = [line for line in re.split(r"\n(?=- )", section) if f"`{name}`" in line]
    assert len(lines) == 1, (name, section)
    (effect,) = {e for phrase, e in PROMISES.items() if phrase in lines[0].replace("\n", " ")}
    return effect


def calls_each_tool_once() -> tuple[FunctionModel, list[ModelRequest]]:
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Reply:
        seen.append(request)
        if len(seen) == 1:
            return {"tool_calls": [{"name": n, "arguments": ARGUMENTS[n]} for n in CALLED]}
        return "done"

    return FunctionModel(reply), seen


GATES = {
    "default": lambda: Gate(),
    "per-source rules": lambda: Gate(Policy([
        Rule("restart.on.http", "allow", "restart_from_http", tools=("restart_worker",),
             sources=("http",)),
        Rule("restart.on.slack", "ask", "restart_from_slack_asks", tools=("restart_worker",),
             sources=("slack_dm",), priority=5),
        Rule("no.memory.by.email", "deny", "no_memory_by_email", tools=("node_*",),
             sources=("email",)),
        Rule("usage.private.on.mcp", "deny", "usage_private", tools=("get_usage",),
             sources=("mcp",)),
    ])),
}


@pytest.mark.slow
@pytest.mark.parametrize("gate", sorted(GATES))
@pytest.mark.parametrize("source", SOURCES)
def test_for_every_source_the_prompt_promises_what_the_gate_does(
    ledger: Any, source: str, gate: str
) -> None:
    model, seen = calls_each_tool_once()
    runtime = Runtime(model=model, ledger=ledger, tools=[restart_worker],
                      plugins=PluginHost.builtin_only(), gate=GATES[gate]())
    run(runtime.respond(message(source)))
    prompt = seen[0].messages[0].content
    assert seen[0].messages[0].role == "system"
    decided = {e.data["tool_name"]: e.data for e in run(ledger.entries(
        kinds=["policy.decision"]))}
    assert sorted(decided) == sorted(CALLED)
    for name in CALLED:
        assert decided[name]["source"] == source
        assert promised(prompt, name) == decided[name]["effect"], (source, name, prompt)


def test_on_a_slack_dm_the_default_prompt_says_a_mutating_tool_is_refused_not_held(
    ledger: Any
) -> None:
    model, seen = calls_each_tool_once()
    runtime = Runtime(model=model, ledger=ledger, tools=[restart_worker],
                      plugins=PluginHost.builtin_only())
    result = run(runtime.respond(message("slack_dm")))
    prompt = seen[0].messages[0].content
    assert "Not allowed here: `restart_worker`." in prompt
    assert "wait for the operator's approval" not in prompt
    assert result.awaiting_approval is None
    cli_model, cli_seen = calls_each_tool_once()
    cli = Runtime(model=cli_model, ledger=ledger, tools=[restart_worker],
                  plugins=PluginHost.builtin_only())
    run(cli.respond(message("cli")))
    assert "waiting for approval: `restart_worker`." in cli_seen[0].messages[0].content


def test_a_plugin_narrowing_the_tools_gets_the_prompt_of_its_source(ledger: Any) -> None:
    from overt.hooks import hookimpl

    class OnlyRestart:
        @hookimpl
        def pre_tool_list_finalized(self, tools: list[Any]) -> list[Any]:
            return [t for t in tools if t.name == "restart_worker"]

    host = PluginHost.builtin_only()
    host.register(OnlyRestart(), "only_restart")
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> Reply:
        seen.append(request)
        return "ok"

    runtime = Runtime(model=FunctionModel(reply), ledger=ledger, tools=[restart_worker],
                      plugins=host)
    run(runtime.respond(message("email")))
    prompt = seen[0].messages[0].content
    assert promised(prompt, "restart_worker") == "deny"
    assert "get_usage" not in prompt
