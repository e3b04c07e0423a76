"""The tool-call hooks: block, provide, observe, transform; seed 002's sample traces."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import pytest

from overt.engine import loop
from overt.hooks import Block, hookimpl
from overt.models.fake import ScriptedModel
from overt.tools import shapes
from overt.tools.base import tool
from overt.types import IncomingMessage
from tests.backends import Raw
from tests.conftest import cli_message, run
from tests.hooks.conftest import PluggedFactory, kinds, records

KORA_TOOLS = {"kora__get_operational_state"}
KORA_STATE = '{"primary_state":"ready","claim_permission":"normal"}'


@tool
async def write_file(path: str, text: str) -> str:
    """Write a file (a stand-in for a registry tool the bridge does not know)."""
    return f"wrote {len(text)} bytes to {path}"


class KoraBridge:
    """Seed 002's tool bridge: offers its tools in the OpenAI shape and answers them itself."""

    @hookimpl
    def register_tools(self) -> list[dict[str, Any]]:
        return [shapes.anthropic_to_openai({
            "name": "kora__get_operational_state",
            "description": "What state the operator's system is in.",
            "input_schema": {"type": "object", "properties": {}}})]

    @hookimpl
    def pre_tool_call_can_provide_result(self, tool_name: str) -> dict[str, str] | None:
        if tool_name not in KORA_TOOLS:
            return None  # not ours: the registry answers
        return {"result": KORA_STATE}


class Trail:
    """Notes every tool-call hook it sees, in order."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    @hookimpl
    def pre_tool_call(self, tool_name: str) -> None:
        self.seen.append("pre_tool_call")

    @hookimpl
    def pre_tool_call_can_provide_result(self, tool_name: str) -> None:
        self.seen.append("pre_tool_call_can_provide_result")

    @hookimpl
    def post_tool_call(self, tool_name: str, provided_by: str | None) -> None:
        self.seen.append(f"post_tool_call(provided_by={provided_by})")

    @hookimpl
    def transform_tool_result(self, tool_name: str) -> None:
        self.seen.append("transform_tool_result")


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A spy on registry dispatch: the names of the tools it ran."""
    ran: list[str] = []
    original = loop.execute

    async def spy(tool_: Any, call: Any, context: Any, timeout: Any) -> Any:
        ran.append(call.name)
        return await original(tool_, call, context, timeout)

    monkeypatch.setattr(loop, "execute", spy)
    return ran


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def slack_dm(text: str) -> IncomingMessage:
    """Seed 002's trace arrives as a Slack DM."""
    return IncomingMessage("slack_dm", text, {"channel_id": "D1", "event_ts": "1.0"})


def test_sample_trace_a_bridged_tool_is_provided_and_never_reaches_registry_dispatch(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    seen: list[str] = []
    model = ScriptedModel([{"tool_calls": [call("kora__get_operational_state")]},
                           "All systems ready."])
    runtime = plugged(model, Trail(seen), KoraBridge())
    result = run(runtime.respond(slack_dm("what's my burn?")))
    assert result.text == "All systems ready." and result.error is None
    assert result.tools_used == ["kora__get_operational_state"]
    assert dispatched == []
    assert model.requests[1].messages[-1].content == KORA_STATE
    assert "kora__get_operational_state" in [t.name for t in model.requests[0].tools]
    assert seen == ["pre_tool_call", "pre_tool_call_can_provide_result",
                    "post_tool_call(provided_by=KoraBridge)", "transform_tool_result"]
    assert kinds(ledger)[2:8] == ["inference", "policy.decision", "tool_call.started",
                                  "hook.declined", "hook.provided", "tool_call.completed"]
    (declined,) = records(ledger, "hook.declined")
    assert declined["plugin"] == "Trail"  # it only watches: it had nothing to provide
    (completed,) = records(ledger, "tool_call.completed")
    assert completed["tool_status"] == "ok" and completed["provided_by"] == "KoraBridge"
    (provided,) = records(ledger, "hook.provided")
    assert provided["plugin"] == "KoraBridge"
    assert provided["hook"] == "pre_tool_call_can_provide_result"
    assert run(ledger.verify()).ok


def test_sample_trace_a_tool_the_bridge_does_not_know_falls_through_to_dispatch(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    seen: list[str] = []
    model = ScriptedModel([{"tool_calls": [call("write_file", path="a.txt", text="hi")]},
                           "Written."])
    runtime = plugged(model, Trail(seen), KoraBridge(), tools=[write_file])
    result = run(runtime.respond(cli_message()))
    assert dispatched == ["write_file"] and result.tools_used == ["write_file"]
    assert model.requests[1].messages[-1].content == "wrote 2 bytes to a.txt"
    assert seen == ["pre_tool_call", "pre_tool_call_can_provide_result",
                    "post_tool_call(provided_by=None)", "transform_tool_result"]
    (completed,) = records(ledger, "tool_call.completed")
    assert completed["provided_by"] is None and completed["tool_status"] == "ok"
    assert records(ledger, "hook.provided") == []


def test_the_hooks_fire_in_the_pinned_order_around_dispatch(
    plugged: PluggedFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    original = loop.execute

    async def noted(*args: Any) -> Any:
        seen.append("dispatch")
        return await original(*args)

    monkeypatch.setattr(loop, "execute", noted)
    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    run(plugged(model, Trail(seen), tools=[write_file]).respond(cli_message()))
    assert seen == ["pre_tool_call", "pre_tool_call_can_provide_result", "dispatch",
                    "post_tool_call(provided_by=None)", "transform_tool_result"]


def test_a_provided_result_on_a_registry_tool_short_circuits_its_function(
    plugged: PluggedFactory, dispatched: list[str]
) -> None:
    class Cache:
        @hookimpl
        def pre_tool_call_can_provide_result(self, tool_name: str,
                                             args: dict[str, Any]) -> dict[str, Any]:
            return {"result": {"cached": args["path"]}}

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    run(plugged(model, Cache(), tools=[write_file]).respond(cli_message()))
    assert dispatched == []
    assert model.requests[1].messages[-1].content == '{"cached": "p"}'


def test_the_intent_is_committed_before_a_plugin_provides_the_result(
    plugged: PluggedFactory, ledger: Any
) -> None:
    seen: list[str] = []

    class Reads:
        @hookimpl
        async def pre_tool_call_can_provide_result(self, task_id: str) -> dict[str, str]:
            seen.extend(e.kind for e in await ledger.entries(turn_id=task_id))
            return {"result": "done"}

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    run(plugged(model, Reads(), tools=[write_file]).respond(cli_message()))
    assert seen == ["turn.started", "inference", "policy.decision", "tool_call.started"]


def test_answers_that_are_not_results_fall_through_to_the_next_plugin_then_the_registry(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    class NotADict:
        @hookimpl
        def pre_tool_call_can_provide_result(self) -> str:
            return "a bare string"

    class NoResultKey:
        @hookimpl
        def pre_tool_call_can_provide_result(self) -> dict[str, str]:
            return {"answer": "wrong key"}

    class Declines:
        @hookimpl
        def pre_tool_call_can_provide_result(self) -> None:
            return None

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    result = run(plugged(model, NotADict(), NoResultKey(), Declines(), tools=[write_file])
                 .respond(cli_message()))
    assert dispatched == ["write_file"] and result.error is None
    assert model.requests[1].messages[-1].content == "wrote 1 bytes to p"
    errors = records(ledger, "hook.error")
    assert [(e["plugin"], e["consequence"]) for e in errors] == [("NotADict", "fell_through")]


def test_a_provider_with_nothing_to_provide_is_recorded_as_declined_not_as_an_error(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    class NoResultKey:
        @hookimpl
        def pre_tool_call_can_provide_result(self) -> dict[str, str]:
            return {"note": "not mine"}

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]},
                           {"tool_calls": [call("write_file", path="q", text="u")]}, "ok"])
    result = run(plugged(model, NoResultKey(), KoraBridge(), tools=[write_file])
                 .respond(cli_message()))
    assert dispatched == ["write_file", "write_file"] and result.error is None
    assert records(ledger, "hook.error") == []
    declined = records(ledger, "hook.declined")
    assert [(d["plugin"], d["hook"], d["tool_name"]) for d in declined] == [
        ("NoResultKey", "pre_tool_call_can_provide_result", "write_file"),
        ("KoraBridge", "pre_tool_call_can_provide_result", "write_file")] * 2
    completed = records(ledger, "tool_call.completed")
    assert [(c["tool_status"], c["provided_by"]) for c in completed] == [("ok", None)] * 2
    started = records(ledger, "tool_call.started")
    assert [d["tool_call_id"] for d in declined] == [
        started[0]["tool_call_id"]] * 2 + [started[1]["tool_call_id"]] * 2
    assert run(ledger.verify()).ok


def test_a_raising_provider_is_logged_at_debug_recorded_and_the_next_plugin_answers(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str],
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="overt.hooks")

    class Broken:
        @hookimpl
        def pre_tool_call_can_provide_result(self) -> None:
            raise KeyError("SECRET-in-the-exception")

    model = ScriptedModel([{"tool_calls": [call("kora__get_operational_state")]}, "ok"])
    result = run(plugged(model, ("broken", Broken()), KoraBridge()).respond(cli_message()))
    assert result.error is None and dispatched == []
    assert model.requests[1].messages[-1].content == KORA_STATE
    (error,) = records(ledger, "hook.error")
    assert error["plugin"] == "broken" and error["hook"] == "pre_tool_call_can_provide_result"
    assert error["error_type"] == "KeyError" and error["consequence"] == "fell_through"
    assert "SECRET" in run(ledger.content(error["error_digest"]))
    (line,) = [r for r in caplog.records if r.name == "overt.hooks"]
    assert line.levelno == logging.DEBUG and "broken" in line.getMessage()
    assert "SECRET" not in line.getMessage()
    assert records(ledger, "tool_call.completed")[0]["provided_by"] == "KoraBridge"


def test_a_raising_provider_alone_falls_through_to_registry_dispatch(
    plugged: PluggedFactory, dispatched: list[str]
) -> None:
    class Broken:
        @hookimpl
        async def pre_tool_call_can_provide_result(self) -> None:
            raise RuntimeError("down")

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    result = run(plugged(model, Broken(), tools=[write_file]).respond(cli_message()))
    assert dispatched == ["write_file"] and result.tools_used == ["write_file"]


def test_an_offered_tool_that_no_plugin_answers_is_not_allowed(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class OffersOnly:
        @hookimpl
        def register_tools(self) -> list[dict[str, Any]]:
            return [{"name": "ghost", "description": "nobody answers",
                     "input_schema": {"type": "object", "properties": {}}}]

        @hookimpl
        def pre_tool_call_can_provide_result(self) -> None:
            return None

    model = ScriptedModel([{"tool_calls": [call("ghost")]}, "ok"])
    result = run(plugged(model, OffersOnly()).respond(cli_message()))
    (completed,) = records(ledger, "tool_call.completed")
    assert completed["tool_status"] == "not_allowed" and result.tools_used == []


def test_a_block_stops_the_call_and_is_recorded_with_its_reason_and_plugin(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    class NoWrites:
        @hookimpl
        def pre_tool_call(self, tool_name: str) -> Block | None:
            return Block("writes_off", "writing is switched off") if tool_name == "write_file" \
                else None

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    result = run(plugged(model, NoWrites(), tools=[write_file]).respond(cli_message()))
    assert dispatched == [] and result.tools_used == []
    read = model.requests[1].messages[-1]
    assert read.is_error
    assert read.content == "writes_off: blocked by plugin NoWrites: writing is switched off"
    (completed,) = records(ledger, "tool_call.completed")
    assert completed["tool_status"] == "not_allowed" and completed["reason_code"] == "writes_off"
    (blocked,) = records(ledger, "hook.blocked")
    assert blocked == {"plugin": "NoWrites", "hook": "pre_tool_call",
                       "tool_call_id": completed["tool_call_id"], "tool_name": "write_file",
                       "reason_code": "writes_off"}
    assert "tool_call.started" not in kinds(ledger)


def test_a_string_block_is_shorthand_for_a_blocked_reason(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Says:
        @hookimpl
        def pre_tool_call(self) -> str:
            return "not today"

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    run(plugged(model, Says(), tools=[write_file]).respond(cli_message()))
    assert records(ledger, "tool_call.completed")[0]["reason_code"] == "blocked"
    assert model.requests[1].messages[-1].content.endswith("not today")


def test_a_raising_block_check_fails_closed_and_says_so_on_the_record(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    class Broken:
        @hookimpl
        def pre_tool_call(self) -> None:
            raise ValueError("policy file missing")

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    result = run(plugged(model, Broken(), tools=[write_file]).respond(cli_message()))
    assert dispatched == [] and result.tools_used == []
    (completed,) = records(ledger, "tool_call.completed")
    assert completed["tool_status"] == "not_allowed" and completed["reason_code"] == "hook_error"
    (error,) = records(ledger, "hook.error")
    assert error["consequence"] == "blocked" and error["error_type"] == "ValueError"
    assert error["tool_call_id"] == completed["tool_call_id"]


def test_a_block_check_answering_junk_fails_closed(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    class SaysYes:
        @hookimpl
        def pre_tool_call(self) -> bool:
            return True

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    run(plugged(model, SaysYes(), tools=[write_file]).respond(cli_message()))
    assert dispatched == []
    assert records(ledger, "hook.error")[0]["consequence"] == "blocked"


def test_a_hanging_async_block_check_is_cancelled_at_its_timeout_and_blocks(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    class Hangs:
        @hookimpl
        async def pre_tool_call(self) -> None:
            await asyncio.Event().wait()  # never set

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    runtime = plugged(model, Hangs(), tools=[write_file], timeouts={"pre_tool_call": 0.05})
    result = run(runtime.respond(cli_message()))
    assert dispatched == [] and result.error is None
    (completed,) = records(ledger, "tool_call.completed")
    assert completed["reason_code"] == "hook_timeout"
    (error,) = records(ledger, "hook.error")
    assert error["error_type"] == "HookTimeout" and error["consequence"] == "blocked"


def test_a_sync_block_check_that_returns_past_its_timeout_counts_as_timed_out(
    plugged: PluggedFactory, ledger: Any, dispatched: list[str]
) -> None:
    class Slow:
        @hookimpl
        def pre_tool_call(self) -> None:
            threading.Event().wait(0.02)  # cannot be interrupted: measured instead

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    run(plugged(model, Slow(), tools=[write_file], timeouts={"pre_tool_call": 0.001})
        .respond(cli_message()))
    assert dispatched == []
    assert records(ledger, "tool_call.completed")[0]["reason_code"] == "hook_timeout"


def test_the_first_block_wins_and_later_checks_are_not_asked(
    plugged: PluggedFactory, ledger: Any
) -> None:
    asked: list[str] = []

    class First:
        @hookimpl
        def pre_tool_call(self) -> Block:
            asked.append("first")
            return Block("first_says_no")

    class Second:
        @hookimpl
        def pre_tool_call(self) -> None:
            asked.append("second")

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    run(plugged(model, First(), Second(), tools=[write_file]).respond(cli_message()))
    assert asked == ["first"]
    assert records(ledger, "hook.blocked")[0]["plugin"] == "First"


def test_a_transformed_result_is_what_the_model_reads_and_both_bodies_are_on_the_record(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Redacts:
        @hookimpl
        def transform_tool_result(self, result: str) -> str:
            return result.replace("a.txt", "[path]")

    model = ScriptedModel([{"tool_calls": [call("write_file", path="a.txt", text="hi")]}, "ok"])
    run(plugged(model, Redacts(), tools=[write_file]).respond(cli_message()))
    assert model.requests[1].messages[-1].content == "wrote 2 bytes to [path]"
    (completed,) = records(ledger, "tool_call.completed")
    assert run(ledger.content(completed["result_digest"])) == "wrote 2 bytes to a.txt"
    (changed,) = records(ledger, "hook.transformed")
    assert changed["plugin"] == "Redacts" and changed["hook"] == "transform_tool_result"
    assert changed["before_digest"] == completed["result_digest"]
    assert run(ledger.content(changed["after_digest"])) == "wrote 2 bytes to [path]"


def test_a_raising_observer_is_recorded_and_the_call_goes_on(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Broken:
        @hookimpl
        def post_tool_call(self) -> None:
            raise RuntimeError("observer down")

    model = ScriptedModel([{"tool_calls": [call("write_file", path="p", text="t")]}, "ok"])
    result = run(plugged(model, Broken(), tools=[write_file]).respond(cli_message()))
    assert result.tools_used == ["write_file"]
    (error,) = records(ledger, "hook.error")
    assert error["hook"] == "post_tool_call" and error["consequence"] == "ignored"


def test_hooks_get_copies_of_the_arguments_so_they_cannot_change_what_runs(
    plugged: PluggedFactory, ledger: Any
) -> None:
    class Meddles:
        @hookimpl
        def pre_tool_call(self, args: dict[str, Any]) -> None:
            args["path"] = "/etc/passwd"

    model = ScriptedModel([{"tool_calls": [call("write_file", path="a.txt", text="hi")]}, "ok"])
    run(plugged(model, Meddles(), tools=[write_file]).respond(cli_message()))
    assert model.requests[1].messages[-1].content == "wrote 2 bytes to a.txt"


def test_no_secret_from_hooks_reaches_audit_rows_or_log_lines(
    plugged: PluggedFactory, raw: Raw, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "SECRET-9d1e77"
    caplog.set_level(logging.DEBUG)

    class Leaky:
        @hookimpl
        def pre_tool_call(self, tool_name: str, args: dict[str, Any]) -> Block | None:
            if tool_name == "write_file" and args["text"] == "block me":
                return Block("leaky", f"blocked because of {marker}")
            return None

        @hookimpl
        def pre_tool_call_can_provide_result(self, args: dict[str, Any]) -> None:
            raise ValueError(f"cannot handle {args} {marker}")

        @hookimpl
        def transform_tool_result(self, result: str) -> str:
            return f"{result} {marker}"

    model = ScriptedModel([
        {"tool_calls": [call("write_file", path=marker, text="block me"),
                        call("write_file", path=marker, text=marker)]},
        f"done {marker}"])
    run(plugged(model, Leaky(), tools=[write_file]).respond(cli_message(marker)))
    for table in [t for t in raw.tables() if not t.startswith("content_")]:
        for row in raw.query(f"SELECT * FROM {table}"):
            assert marker not in json.dumps(row, default=str), f"{table} holds the secret"
    assert any(r.name == "overt.hooks" for r in caplog.records)
    for record in caplog.records:
        assert marker not in record.getMessage()


class ReadOnlyBridge:
    """Describes a tool it answers itself, and says it changes nothing."""

    @hookimpl
    def register_tools(self) -> list[Any]:
        return [{"name": "wiki_lookup", "description": "Look a page up in the wiki.",
                 "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
                 "read_only": True}]

    @hookimpl
    def pre_tool_call_can_provide_result(self, tool_name: str) -> dict[str, str] | None:
        return {"result": "Isokron is the staging host."} if tool_name == "wiki_lookup" else None


class MutatingBridge(ReadOnlyBridge):
    @hookimpl
    def register_tools(self) -> list[Any]:
        return [{"name": "wiki_lookup", "description": "Look a page up in the wiki.",
                 "input_schema": {"type": "object", "properties": {}}}]


@pytest.mark.parametrize("bridge,allowed", [(ReadOnlyBridge(), True), (MutatingBridge(), False)])
def test_a_plugin_described_tool_declared_read_only_is_allowed_on_a_slack_dm(
    ledger: Any, tmp_path: Any, bridge: Any, allowed: bool,
) -> None:
    from overt.hooks import PluginHost
    from overt.models.fake import ScriptedModel
    from overt.policy.gate import Gate
    from overt.runtime import Runtime
    from overt.types import IncomingMessage

    host = PluginHost()
    host.register(bridge, "bridge")
    model = ScriptedModel([{"tool_calls": [{"name": "wiki_lookup", "arguments": {}}]}, "ok"])
    runtime = Runtime(model=model, ledger=ledger, tools=(), plugins=host, gate=Gate())
    run(runtime.respond(IncomingMessage("slack_dm", "which host?",
                                        {"channel_id": "D1", "event_ts": "1.0"})))
    decision = run(ledger.entries(kinds=["policy.decision"]))[0].data
    assert decision["mutating"] is (not allowed)
    assert (decision["effect"] == "allow") is allowed
    completed = run(ledger.entries(kinds=["tool_call.completed"]))[0].data
    assert (completed["tool_status"] == "ok") is allowed, (completed["reason_code"], completed)


def test_no_secret_from_a_provided_result_or_a_model_chosen_call_id_reaches_audit_rows(
    plugged: PluggedFactory, raw: Raw, caplog: pytest.LogCaptureFixture
) -> None:
    from overt.types import ModelResponse, ToolCall

    marker = "SECRET-4b2c10"
    caplog.set_level(logging.DEBUG)

    class Provides:
        @hookimpl
        def pre_tool_call_can_provide_result(self, tool_call_id: str) -> dict[str, str]:
            assert marker not in tool_call_id  # hooks see overt's id too
            return {"result": f"provided {marker}"}

        @hookimpl
        def post_tool_call(self, result: str) -> None:
            raise RuntimeError(f"observer saw {result}")

    model = ScriptedModel([
        ModelResponse("", (ToolCall(f"{marker}-id", "write_file", {"path": "a", "text": "b"}),)),
        "done"])
    run(plugged(model, Provides(), tools=[write_file]).respond(cli_message()))
    assert model.requests[1].messages[-1].content == f"provided {marker}"
    for table in [t for t in raw.tables() if not t.startswith("content_")]:
        for row in raw.query(f"SELECT * FROM {table}"):
            assert marker not in json.dumps(row, default=str), f"{table} holds the secret"
    for record in caplog.records:
        assert marker not in record.getMessage()
