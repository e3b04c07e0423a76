from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.cli.main import main

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "overt-example-plugin"
           / "overt_example_plugin.py")


def test_overt_plugins_lists_each_plugin_its_status_and_hooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OVERT_PLUGINS_ENABLED", raising=False)
    assert main(["--db", str(tmp_path / "l.db"), "--plugin-file", str(EXAMPLE),
                 "plugins"]) == 0
    out = capsys.readouterr().out
    assert "builtin  [enabled]  built-in" in out
    assert "overt_example_plugin  [available]  file " in out
    assert "hooks: pre_tool_call, register_tools" in out


def test_overt_plugins_json_shows_enable_and_disable_from_flags_and_env(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERT_PLUGINS_ENABLED", "overt_example_plugin")
    assert main(["--db", str(tmp_path / "l.db"), "--plugin-file", str(EXAMPLE),
                 "--disable-plugin", "builtin", "plugins", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert listed["builtin"]["status"] == "disabled"
    assert listed["overt_example_plugin"]["status"] == "enabled"
    assert listed["overt_example_plugin"]["hooks"] == ["pre_tool_call", "register_tools"]


def test_ask_with_an_enabled_plugin_runs_its_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text('{"tool_calls": [{"name": "utc_now", "arguments": {}}]}\n'
                      '{"text": "It is late."}\n')
    code = main(["--db", str(tmp_path / "l.db"), "--plugin-file", str(EXAMPLE),
                 "--enable-plugin", "overt_example_plugin", "ask", "time?", "--model",
                 f"scripted:{script}", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["tools_used"] == ["utc_now"]


def test_enabling_a_plugin_that_is_not_installed_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", str(tmp_path / "l.db"), "--enable-plugin", "nope", "ask", "hi",
                 "--model", "scripted:x"]) == 2
    assert "not installed" in capsys.readouterr().err
