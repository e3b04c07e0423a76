"""What the model reads of a tool's result: a huge one cut (the record keeps it whole),
and a tool that exits the interpreter answered as a failure, not obeyed."""

from __future__ import annotations

import pytest

from overt.config import Config
from overt.engine.values import EngineSettings
from overt.errors import ConfigError
from overt.events import ToolCallCompleted, ToolCallStarted
from overt.ledger.base import Ledger
from overt.ledger.chain import body_text
from overt.ledger.reads.conversations import conversation
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import IncomingMessage
from tests.conftest import run


@tool(read_only=True)
async def dump(size: int) -> str:
    """A long text."""
    return "".join(str(i % 10) for i in range(size))


@tool(read_only=True)
async def script(args: str) -> str:
    """A tool wrapping a command-line script, which exits on arguments it refuses."""
    raise SystemExit(f"usage: script [--verbose]: unrecognized arguments: {args}")


def _turn(ledger: Ledger, call: dict[str, object], **settings: object) -> tuple[
        ScriptedModel, object]:
    model = ScriptedModel([{"tool_calls": [call]}, {"text": "done"}])
    runtime = Runtime(model=model, ledger=ledger, tools=[dump, script],
                      settings=EngineSettings(**settings))  # type: ignore[arg-type]
    return model, run(runtime.respond(IncomingMessage("cli", "go", {})))


def test_a_result_over_the_limit_is_cut_for_the_model_and_kept_whole_on_the_record(
        ledger: Ledger) -> None:
    model, result = _turn(ledger, {"name": "dump", "arguments": {"size": 5000}},
                          max_tool_result_chars=1000)
    read = model.requests[-1].messages[-1].content
    whole = "".join(str(i % 10) for i in range(5000))
    assert read.startswith(whole[:1000]) and whole[:1001] not in read
    assert read.endswith("[overt: the result was cut here, after 1,000 of its 5,000 "
                         "characters]")
    (done,) = run(ledger.entries(kinds=["tool_call.completed"]))
    result_digest = done.event(ToolCallCompleted).result_digest
    assert result_digest is not None and run(ledger.content(result_digest)) == whole
    assert result.error is None and result.text == "done"  # type: ignore[attr-defined]
    assert run(ledger.verify()).ok


def test_a_calls_arguments_stored_with_its_start_are_read_with_its_completion(
        ledger: Ledger) -> None:
    """The arguments' body is kept once, under the seq of the first entry naming it
    (before the completion, in an earlier commit): the conversation finds it there."""
    _turn(ledger, {"name": "dump", "arguments": {"size": 3}})
    (start,) = run(ledger.entries(kinds=["tool_call.started"]))
    (done,) = run(ledger.entries(kinds=["tool_call.completed"]))
    args_digest = done.event(ToolCallCompleted).args_sha256
    assert start.event(ToolCallStarted).args_sha256 == args_digest and start.seq < done.seq
    (found,) = [e for e in run(conversation(ledger, done.session_id or ""))
                if e.kind == "tool_call.completed"]
    assert (found.seq, body_text(found.args_body)) == (done.seq, '{"size":3}')
    assert body_text(found.body) == "012"


def test_a_result_within_the_limit_is_read_whole_and_the_default_limit_is_50000(
        ledger: Ledger) -> None:
    model, _ = _turn(ledger, {"name": "dump", "arguments": {"size": 50_000}})
    assert model.requests[-1].messages[-1].content == "".join(
        str(i % 10) for i in range(50_000))
    model, _ = _turn(ledger, {"name": "dump", "arguments": {"size": 50_001}})
    assert "cut here, after 50,000 of its 50,001" in model.requests[-1].messages[-1].content


def test_a_tool_that_exits_the_interpreter_is_a_failed_call_and_the_turn_answers(
        ledger: Ledger) -> None:
    model, result = _turn(ledger, {"name": "script", "arguments": {"args": "--nope"}})
    read = model.requests[-1].messages[-1]
    assert read.is_error and read.content.startswith("tool_execution_error: SystemExit: usage:")
    (done,) = run(ledger.entries(kinds=["tool_call.completed"]))
    completed = done.event(ToolCallCompleted)
    assert (completed.tool_status, completed.exc_type) == ("execution_error", "SystemExit")
    assert result.text == "done"  # type: ignore[attr-defined]
    assert run(ledger.count("turn.completed")) == 1


def test_the_limit_is_configured_by_env_or_limits_and_refused_below_100() -> None:
    env = {"OVERT_DB": "x.db", "OVERT_MAX_TOOL_RESULT_CHARS": "2000"}
    assert Config.from_env(env).max_tool_result_chars == 2000
    with pytest.raises(ConfigError, match="max_tool_result_chars must be at least 100"):
        Config(db="x.db", max_tool_result_chars=10)
