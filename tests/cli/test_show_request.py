"""``overt show TURN --content`` prints each inference's request beside its response."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.cli.main import main


def test_show_content_prints_the_request_each_inference_sent_beside_its_response(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text('{"tool_calls": [{"name": "get_usage", "arguments": {"period": "7d"}}]}\n'
                      '{"text": "You used 0 tokens."}\n')
    db = tmp_path / "l.db"
    assert main(["--db", str(db), "ask", "what's my burn?", "--model", f"scripted:{script}",
                 "--json"]) == 0
    turn_id = json.loads(capsys.readouterr().out)["turn_id"]
    assert main(["--db", str(db), "show", turn_id]) == 0
    assert "request:" not in capsys.readouterr().out  # the audit tier alone: no text
    assert main(["--db", str(db), "show", turn_id, "--content"]) == 0
    shown = capsys.readouterr().out
    first, second = shown.split("inference #1")
    assert "request: {" in first and '"content": "what\'s my burn?"' in first
    assert '"name": "get_usage"' in first and '"system": "' in first
    assert '"role": "tool"' in second  # the second request reads the tool's result
    assert first.index("request:") < first.index("response:")
