"""Read-only calls of one response run together: decided and committed first, run
at once, recorded and read back in the order the model asked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from overt.channels.transcript import Transcript
from overt.events import ToolCallCompleted
from overt.hooks import PluginHost, hookimpl
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.tools.base import tool
from tests.conftest import ALLOW_ALL, RuntimeFactory, cli_message, run

started: dict[str, asyncio.Event] = {}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def kinds(ledger: Ledger) -> list[str]:
    return [e.kind for e in run(ledger.entries()) if e.kind != "reasoning.step"]


@tool(read_only=True)
async def slow_read(key: str) -> str:
    """Waits until the other read started (both run at once), then answers late."""
    started[key] = asyncio.Event()
    started[key].set()
    await asyncio.wait_for(_other(key), 5)
    await asyncio.sleep(0.05)  # the first asked finishes last
    return f"slow:{key}"


async def _other(key: str) -> None:
    while not any(k != key and e.is_set() for k, e in started.items()):
        await asyncio.sleep(0.001)


@tool(read_only=True)
async def fast_read(key: str) -> str:
    """Waits until the other read started, then answers at once."""
    started[key] = asyncio.Event()
    started[key].set()
    await asyncio.wait_for(_other(key), 5)
    return f"fast:{key}"


@tool(read_only=True)
async def broken_read(key: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no {key}")


@tool(read_only=True)
async def plain_read(key: str) -> str:
    """Answers at once."""
    return f"read:{key}"


@tool
async def write(key: str) -> str:
    """Changes something."""
    return f"wrote:{key}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    started.clear()


def test_two_reads_run_at_once_and_are_read_back_in_the_order_asked(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    model = ScriptedModel([{"tool_calls": [call("slow_read", key="a"),
                                           call("fast_read", key="b")]}, "done"])
    result = run(make_runtime(model, tools=[slow_read, fast_read]).respond(cli_message()))
    assert result.error is None and result.tools_used == ["slow_read", "fast_read"]
    # each waited for the other to start: run one after the other, both would time out
    assert [m.content for m in model.requests[1].messages[-2:]] == ["slow:a", "fast:b"]
    assert kinds(ledger) == [
        "runtime.started", "turn.started", "inference",
        "policy.decision", "tool_call.started", "policy.decision", "tool_call.started",
        "tool_call.completed", "tool_call.completed", "inference", "turn.completed"]
    completed = run(ledger.entries(kinds=["tool_call.completed"]))
    assert [e.event(ToolCallCompleted).tool_name for e in completed] == [
        "slow_read", "fast_read"]
    assert all(e.event(ToolCallCompleted).tool_status == "ok" for e in completed)
    assert run(ledger.verify()).ok


def test_the_decisions_and_intents_of_a_group_are_one_commit(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    batches: list[list[str]] = []
    record = ledger.record

    async def counted(events: Any, *args: Any, **kwargs: Any) -> Any:
        batches.append([e.kind for e in events])
        return await record(events, *args, **kwargs)

    ledger.record = counted  # type: ignore[method-assign]
    model = ScriptedModel([{"tool_calls": [call("plain_read", key="a"),
                                           call("plain_read", key="b")]}, "done"])
    run(make_runtime(model, tools=[plain_read]).respond(cli_message()))
    turn = [b for b in batches if "runtime.started" not in b]
    assert len(turn) == 4  # model call, both reads, model call, answer
    assert [k for k in turn[1] if k != "reasoning.step"] == [
        "inference", "policy.decision", "tool_call.started", "policy.decision",
        "tool_call.started"]


def test_a_call_that_changes_something_runs_alone_after_the_reads(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    model = ScriptedModel([{"tool_calls": [call("plain_read", key="a"),
                                           call("plain_read", key="b"),
                                           call("write", key="c"),
                                           call("plain_read", key="d")]}, "done"])
    result = run(make_runtime(model, tools=[plain_read, write]).respond(cli_message()))
    assert result.tools_used == ["plain_read", "plain_read", "write", "plain_read"]
    assert kinds(ledger)[3:-2] == [
        "policy.decision", "tool_call.started", "policy.decision", "tool_call.started",
        "tool_call.completed", "tool_call.completed",
        "policy.decision", "tool_call.started", "tool_call.completed",
        "policy.decision", "tool_call.started", "tool_call.completed"]
    assert [m.content for m in model.requests[1].messages[-4:]] == [
        "read:a", "read:b", "wrote:c", "read:d"]


def test_a_read_held_for_approval_ends_the_group_and_the_turn_resumes_after_it(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    gate = Gate(Policy([Rule("ask-b", "ask", "needs_a_person", "b needs a person",
                             priority=10, tools=("fast_read",)),
                        Rule("open", "allow", "open")]))
    model = ScriptedModel([{"tool_calls": [call("plain_read", key="a"),
                                           call("fast_read", key="b"),
                                           call("plain_read", key="c")]}, "done"])
    runtime = make_runtime(model, tools=[plain_read, fast_read], gate=gate)
    paused = run(runtime.respond(cli_message()))
    assert paused.awaiting_approval is not None and paused.tools_used == ["plain_read"]
    started["other"] = asyncio.Event()  # fast_read runs alone after the approval
    started["other"].set()
    resumed = run(runtime.approve(paused.awaiting_approval))
    assert resumed.result is not None and resumed.result.text == "done"
    assert resumed.result.tools_used == ["plain_read", "fast_read", "plain_read"]
    assert [m.content for m in model.requests[1].messages[-3:]] == [
        "read:a", "fast:b", "read:c"]
    assert run(ledger.verify()).ok


def test_a_run_of_failures_inside_a_group_stops_the_calls_after_it(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    model = ScriptedModel([{"tool_calls": [call("broken_read", key=k) for k in "abc"]
                            + [call("write", key="d")]}, "I stopped"])
    result = run(make_runtime(model, tools=[broken_read, write]).respond(cli_message()))
    statuses = [e.event(ToolCallCompleted).tool_status for e in
                run(ledger.entries(kinds=["tool_call.completed"]))]
    assert statuses == ["execution_error"] * 3 + ["not_allowed"]
    assert result.tools_used == ["broken_read"] * 3  # write was refused, not run
    assert model.requests[-1].tools == ()  # the model answers without tools


def test_a_success_last_in_a_group_breaks_the_run_of_failures(
        make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    model = ScriptedModel([{"tool_calls": [call("broken_read", key=k) for k in "abc"]
                            + [call("plain_read", key="d"), call("write", key="e")]}, "done"])
    result = run(make_runtime(model, tools=[broken_read, plain_read, write]
                              ).respond(cli_message()))
    assert result.tools_used == ["broken_read"] * 3 + ["plain_read", "write"]
    assert model.requests[-1].tools != ()


def test_while_a_plugin_hooks_tool_calls_each_runs_alone(
        ledger: Ledger, tmp_path: Path) -> None:
    seen: list[str] = []

    class Watcher:
        @hookimpl
        def pre_tool_call(self, tool_name: str, args: dict[str, Any]) -> None:
            seen.append(f"{tool_name}:{args['key']}")

    host = PluginHost()
    host.register(Watcher(), "watcher")
    model = ScriptedModel([{"tool_calls": [call("plain_read", key="a"),
                                           call("plain_read", key="b")]}, "done"])
    runtime = Runtime(model=model, ledger=ledger, tools=[plain_read], plugins=host,
                      transcript=Transcript(tmp_path / "transcript.jsonl"), gate=ALLOW_ALL)
    result = run(runtime.respond(cli_message()))
    assert result.tools_used == ["plain_read", "plain_read"]
    assert seen == ["plain_read:a", "plain_read:b"]
    assert kinds(ledger)[3:-2] == [
        "policy.decision", "tool_call.started", "tool_call.completed",
        "policy.decision", "tool_call.started", "tool_call.completed"]
