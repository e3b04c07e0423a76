"""The example plugin in examples/: installable, found by its entry point, a tool and a rule."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.channels.transcript import Transcript
from overt.hooks import PluginHost
from overt.hooks.manager import discover
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from tests.conftest import ALLOW_ALL, BUILTIN_TOOLS, cli_message, run
from tests.hooks.conftest import records

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "overt-example-plugin"
MODULE = EXAMPLE / "overt_example_plugin.py"


def runtime_with(host: PluginHost, ledger: Any, tmp_path: Path, replies: list[Any]) -> Runtime:
    return Runtime(model=ScriptedModel(replies), ledger=ledger, plugins=host, gate=ALLOW_ALL,
                   transcript=Transcript(tmp_path / "t.jsonl"))


def test_the_example_plugin_adds_its_tool_beside_the_built_ins(
    ledger: Any, tmp_path: Path
) -> None:
    host = PluginHost.load(enabled=["overt_example_plugin"], plugin_files=[str(MODULE)])
    runtime = runtime_with(host, ledger, tmp_path, [
        {"tool_calls": [{"name": "utc_now", "arguments": {}}]}, "It is now."])
    assert runtime.tools.names == [*BUILTIN_TOOLS, "utc_now"]
    result = run(runtime.respond(cli_message("what time is it?")))
    assert result.tools_used == ["utc_now"]
    assert records(ledger, "tool_call.completed")[0]["tool_status"] == "ok"


def test_the_example_block_rule_stops_usage_over_all_time_and_lets_bounded_periods_pass(
    ledger: Any, tmp_path: Path
) -> None:
    host = PluginHost.load(enabled=["overt_example_plugin"], plugin_files=[str(MODULE)])
    runtime = runtime_with(host, ledger, tmp_path, [
        {"tool_calls": [{"name": "get_usage", "arguments": {"period": "all"}},
                        {"name": "get_usage", "arguments": {"period": "7d"}}]}, "done"])
    result = run(runtime.respond(cli_message("what did I spend, ever?")))
    assert result.tools_used == ["get_usage"]
    first, second = records(ledger, "tool_call.completed")
    assert first["tool_status"] == "not_allowed"
    assert first["reason_code"] == "usage_history_blocked"
    assert second["tool_status"] == "ok"
    (blocked,) = records(ledger, "hook.blocked")
    assert blocked["plugin"] == "overt_example_plugin" and blocked["tool_name"] == "get_usage"


@pytest.mark.slow
def test_the_example_plugin_installs_offline_and_is_found_by_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source)  # builds leave files beside the source: not in the repo
    target = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.delitem(sys.modules, "overt_example_plugin", raising=False)
    found = {c.name: c for c in discover()}
    assert found["example"].source.startswith("entry point overt_example_plugin")
    host = PluginHost.load(enabled=["example"])
    assert host.names == ["builtin", "example"]
    assert [i.plugin for i in host.hooks.pre_tool_call] == ["example"]
