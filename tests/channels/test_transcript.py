from __future__ import annotations

import json
from pathlib import Path

from overt.models.fake import ScriptedModel
from overt.types import ModelResponse
from tests.conftest import RuntimeFactory, cli_message, run


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tools_used_has_three_states_in_the_transcript(
    make_runtime: RuntimeFactory, tmp_path: Path,
) -> None:
    from overt.errors import ModelError

    runtime = make_runtime(ScriptedModel([
        "no tools needed",
        {"tool_calls": [{"name": "get_usage"}, {"name": "get_usage"},
                        {"name": "get_operational_state"}]}, "used three",
        ModelError("down"),
    ]))
    for _ in range(3):
        run(runtime.respond(cli_message("q", "sess")))
    none_used, three_used, errored = _lines(tmp_path / "transcript.jsonl")
    assert none_used["tools_used"] == []
    assert three_used["tools_used"] == ["get_usage", "get_usage", "get_operational_state"]
    assert "tools_used" not in errored and "error" in errored
    for line in (none_used, three_used, errored):
        assert line["source"] == "cli" and line["caller_session_id"] == "cli:sess"
        assert line["model"] == "scripted" and line["direction"] == "outbound"
        assert {"turn_id", "session_id", "text", "at"} <= set(line)


def test_the_transcript_line_carries_the_reply_text(make_runtime: RuntimeFactory,
                                                    tmp_path: Path) -> None:
    run(make_runtime(ScriptedModel([ModelResponse("exact reply")])).respond(cli_message()))
    (line,) = _lines(tmp_path / "transcript.jsonl")
    assert line["text"] == "exact reply"
