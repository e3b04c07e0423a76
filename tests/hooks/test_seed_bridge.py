"""Seed 002's tool bridge, as its authors write it, on a Slack DM.

The plugin is a file in the seed's own shapes: OpenAI-shaped descriptors
(``{"type": "function", "function": {...}}``) saying read-only inside ``function``,
and a provide hook that answers a call it could not dispatch with the seed's error
envelope (``{"result": json.dumps({"error": "kora_tool_dispatch_error: ..."})}``).
The model is Claude through the real Anthropic SDK, against a local server speaking
the Messages API, so the test reads the ``tool_result`` blocks as the SDK sent them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.channels.transcript import Transcript
from overt.hooks import PluginHost
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.types import IncomingMessage
from tests.conftest import run
from tests.models.test_anthropic import (
    FakeAnthropic,
    Reply,
    message,
    model,
    text,
    tool_use,
)

KORA_HERMES = '''\
import json

from overt.hooks import hookimpl

REASONING_TOOL_ALLOWLIST = {"kora__get_operational_state", "kora__get_burn"}

_KORA_TOOLS = [  # Kora's own descriptors, in the Anthropic shape
    {"name": "kora__get_operational_state",
     "description": "What state the operator's system is in.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "kora__get_burn", "description": "Today's spend.",
     "input_schema": {"type": "object", "properties": {}}},
]


async def execute_reasoning_tool(name, args):
    if name == "kora__get_burn":
        raise ConnectionError("substrate down")
    return {"primary_state": "ready", "claim_permission": "normal"}


def get_kora_tools_for_agent():
    """Kora's tools in the Hermes/OpenAI shape; each only reads."""
    return [{"type": "function",
             "function": {"name": t["name"], "description": t["description"],
                          "parameters": t["input_schema"], "read_only": True}}
            for t in _KORA_TOOLS]


@hookimpl
def register_tools():
    return get_kora_tools_for_agent()


@hookimpl
async def pre_tool_call_can_provide_result(tool_name, args, task_id, session_id,
                                           tool_call_id):
    if tool_name not in REASONING_TOOL_ALLOWLIST:
        return None  # not Kora's: the registry answers
    try:
        value = await execute_reasoning_tool(tool_name, args)
    except Exception as exc:
        return {"result": json.dumps(
            {"error": f"kora_tool_dispatch_error: {type(exc).__name__}: {exc}"})}
    return {"result": json.dumps(value)}
'''


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def bridged_runtime(tmp_path: Path, ledger: Any, api: FakeAnthropic) -> Runtime:
    path = tmp_path / "kora_hermes.py"
    path.write_text(KORA_HERMES)
    host = PluginHost.load(["kora_hermes"], plugin_files=[str(path)])
    return Runtime(model=model(api), ledger=ledger, tools=(), plugins=host, gate=Gate(),
                   transcript=Transcript(tmp_path / "transcript.jsonl"))


def test_the_seed_bridge_runs_on_a_slack_dm_and_its_error_envelope_is_a_failure(
    tmp_path: Path, ledger: Any, api: FakeAnthropic
) -> None:
    api.script(
        Reply(message(tool_use("toolu_1", "kora__get_operational_state"),
                      tool_use("toolu_2", "kora__get_burn"), stop_reason="tool_use")),
        Reply(message(text("All systems ready; today's spend is unavailable."))))
    runtime = bridged_runtime(tmp_path, ledger, api)
    result = run(runtime.respond(IncomingMessage(
        "slack_dm", "what's my burn?", {"channel_id": "D1", "event_ts": "1.0"})))
    assert result.error is None
    assert result.text == "All systems ready; today's spend is unavailable."

    decisions = [e.data for e in run(ledger.entries(kinds=["policy.decision"]))]
    assert [(d["tool_name"], d["source"], d["mutating"], d["effect"], d["reason_code"])
            for d in decisions] == [
        ("kora__get_operational_state", "slack_dm", False, "allow", "read_only"),
        ("kora__get_burn", "slack_dm", False, "allow", "read_only")]
    completed = [e.data for e in run(ledger.entries(kinds=["tool_call.completed"]))]
    assert [(c["tool_name"], c["tool_status"], c["provided_by"]) for c in completed] == [
        ("kora__get_operational_state", "ok", "kora_hermes"),
        ("kora__get_burn", "execution_error", "kora_hermes")]
    assert run(ledger.entries(kinds=["hook.error"])) == []

    state, burn = api.received[1]["messages"][-1]["content"]
    assert state["type"] == burn["type"] == "tool_result"
    assert state["is_error"] is False
    assert json.loads(state["content"]) == {"primary_state": "ready",
                                            "claim_permission": "normal"}
    assert burn["is_error"] is True
    assert burn["content"] == ("tool_execution_error: kora_tool_dispatch_error: "
                               "ConnectionError: substrate down")
    assert run(ledger.content(completed[1]["result_digest"])) == burn["content"]
    assert run(ledger.verify()).ok


def test_without_its_read_only_word_the_seed_bridge_is_refused_on_a_slack_dm(
    tmp_path: Path, ledger: Any, api: FakeAnthropic
) -> None:
    api.script(
        Reply(message(tool_use("toolu_1", "kora__get_operational_state"),
                      stop_reason="tool_use")),
        Reply(message(text("I cannot check that from here."))))
    path = tmp_path / "kora_hermes.py"
    path.write_text(KORA_HERMES.replace(', "read_only": True}}', "}}"))
    host = PluginHost.load(["kora_hermes"], plugin_files=[str(path)])
    runtime = Runtime(model=model(api), ledger=ledger, tools=(), plugins=host, gate=Gate())
    run(runtime.respond(IncomingMessage(
        "slack_dm", "what's my burn?", {"channel_id": "D1", "event_ts": "1.0"})))
    (decision,) = [e.data for e in run(ledger.entries(kinds=["policy.decision"]))]
    assert (decision["mutating"], decision["effect"], decision["reason_code"]) == (
        True, "deny", "mutating_on_dm")
    assert "Not allowed here: `kora__get_operational_state`, `kora__get_burn`." in \
        api.received[0]["system"]
