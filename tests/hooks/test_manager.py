"""Discovery and enablement: nothing runs unless enabled, disabled always wins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overt.config import Config
from overt.errors import PluginError
from overt.hooks import PluginHost, hookimpl, list_plugins
from overt.hooks.manager import ENTRY_POINT_GROUP
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.tools.registry import ToolRegistry
from tests.conftest import BUILTIN_TOOLS, cli_message, run
from tests.hooks.conftest import records

PLUGIN_SOURCE = '''
from overt.hooks import hookimpl
from overt.tools import tool

RAN = []


@tool
def {name}_tool() -> str:
    """A tool from {name}."""
    return "{name}"


@hookimpl
def register_tools():
    RAN.append("register_tools")
    return [{name}_tool]


@hookimpl
def pre_tool_call(tool_name):
    RAN.append("pre_tool_call")
'''


def plugin_file(directory: Path, name: str) -> str:
    path = directory / f"{name}.py"
    path.write_text(PLUGIN_SOURCE.format(name=name))
    return str(path)


def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, module: str) -> None:
    """Install a plugin as a distribution with an ``overt.plugins`` entry point, offline."""
    site = tmp_path / "site"
    dist = site / f"{module}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {module}\n")
    plugin_file(site, module)
    monkeypatch.syspath_prepend(str(site))


def tool_names(host: PluginHost) -> list[str]:
    registry = ToolRegistry()
    host.add_tools(registry)
    return registry.names


def test_an_installed_plugin_is_not_imported_unless_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed(tmp_path, monkeypatch, "quiet", "quiet_plugin_mod")
    host = PluginHost.load()
    assert host.names == ["builtin"]
    assert "quiet_plugin_mod" not in __import__("sys").modules
    assert tool_names(host) == BUILTIN_TOOLS


def test_an_enabled_entry_point_plugin_is_loaded_and_its_tools_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed(tmp_path, monkeypatch, "loud", "loud_plugin_mod")
    host = PluginHost.load(enabled=["loud"])
    assert host.names == ["builtin", "loud"]
    assert host.sources["loud"].startswith("entry point loud_plugin_mod (loud_plugin_mod 1.0)")
    assert tool_names(host) == [*BUILTIN_TOOLS, "loud_plugin_mod_tool"]
    assert [i.plugin for i in host.hooks.pre_tool_call] == ["loud"]


def test_disabled_wins_over_enabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed(tmp_path, monkeypatch, "both", "both_plugin_mod")
    host = PluginHost.load(enabled=["both"], disabled=["both"])
    assert host.names == ["builtin"]


def test_disabling_builtin_removes_overts_own_tools(tmp_path: Path) -> None:
    host = PluginHost.load(disabled=["builtin"])
    assert host.names == [] and tool_names(host) == []


def test_a_plugin_file_runs_only_when_enabled_by_its_stem(tmp_path: Path) -> None:
    path = plugin_file(tmp_path, "from_file")
    assert PluginHost.load(plugin_files=[path]).names == ["builtin"]
    host = PluginHost.load(enabled=["from_file"], plugin_files=[path])
    assert "from_file_tool" in tool_names(host)


def test_plugins_are_asked_in_the_order_enabled_lists_them_with_builtin_last(
    tmp_path: Path,
) -> None:
    files = [plugin_file(tmp_path, name) for name in ("alpha", "beta", "gamma")]
    host = PluginHost.load(enabled=["gamma", "alpha", "beta"], plugin_files=files)
    assert [i.plugin for i in host.hooks.pre_tool_call] == ["gamma", "alpha", "beta"]
    assert [i.plugin for i in host.hooks.register_tools][-1] == "builtin"


def test_two_plugin_files_of_one_stem_stop_the_start_not_one_silently_left_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = plugin_file(tmp_path / "a", "rules"), plugin_file(tmp_path / "b", "rules")
    with pytest.raises(PluginError, match="two plugins are named 'rules'"):
        PluginHost.load(enabled=["rules"], plugin_files=[first, second])


def test_a_plugin_file_named_builtin_stops_the_start_not_shadowed_unread(
    tmp_path: Path,
) -> None:
    with pytest.raises(PluginError, match="two plugins are named 'builtin'"):
        PluginHost.load(enabled=["builtin"], plugin_files=[plugin_file(tmp_path, "builtin")])


def test_enabling_a_plugin_that_is_not_installed_stops_the_start() -> None:
    with pytest.raises(PluginError, match="not installed"):
        PluginHost.load(enabled=["typo_in_the_name"])


def test_a_plugin_that_fails_to_import_stops_the_start_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "broken_import.py"
    path.write_text("raise ImportError('missing dependency')\n")
    with pytest.raises(PluginError, match=r"broken_import .*could not be loaded"):
        PluginHost.load(enabled=["broken_import"], plugin_files=[str(path)])


def test_a_hook_wrapper_is_refused() -> None:
    class Wraps:
        @hookimpl(wrapper=True)
        def pre_tool_call(self) -> Any:
            return (yield)

    with pytest.raises(PluginError, match="wrapper"):
        PluginHost().register(Wraps(), "wraps")


def test_an_implementation_of_an_unknown_hook_is_refused() -> None:
    class Typo:
        @hookimpl
        def pre_tool_cal(self) -> None: ...

    host = PluginHost()
    with pytest.raises(PluginError, match="pre_tool_cal"):
        host.register(Typo(), "typo")
    assert host.names == []


def test_an_argument_the_hook_does_not_have_is_refused() -> None:
    class Wrong:
        @hookimpl
        def pre_tool_call(self, tool_nam: str) -> None: ...

    with pytest.raises(PluginError):
        PluginHost().register(Wrong(), "wrong")


def test_the_snapshot_follows_registration_and_unregistration() -> None:
    class Checks:
        @hookimpl
        def pre_tool_call(self) -> None: ...

    host = PluginHost()
    assert host.hooks.pre_tool_call == () and not host.hooks.per_turn
    host.register(Checks(), "checks")
    assert [i.plugin for i in host.hooks.pre_tool_call] == ["checks"] and host.hooks.per_turn
    host.unregister("checks")
    assert host.hooks.pre_tool_call == ()


class RaisesOnRegister:
    @hookimpl
    def register_tools(self) -> list[Any]:
        raise RuntimeError("registry offline")


class ReturnsJunk:
    @hookimpl
    def register_tools(self) -> Any:
        return "not a list"


@tool
def get_usage() -> str:
    """Collides with the built-in tool's name."""
    return "mine"


class Collides:
    @hookimpl
    def register_tools(self) -> list[Any]:
        return [get_usage]


@pytest.mark.parametrize("plugin,error_type", [
    (RaisesOnRegister(), "RuntimeError"), (ReturnsJunk(), "UsageError"),
    (Collides(), "UsageError")])
def test_a_failing_tool_registry_costs_the_plugin_its_tools_and_is_recorded_at_start(
    ledger: Any, plugin: Any, error_type: str
) -> None:
    host = PluginHost.builtin_only()
    host.register(plugin, "bad")
    runtime = Runtime(model=ScriptedModel(["hi"]), ledger=ledger, plugins=host)
    assert runtime.tools.names == BUILTIN_TOOLS
    result = run(runtime.respond(cli_message()))
    assert result.error is None
    (error,) = records(ledger, "hook.error")
    assert error["plugin"] == "bad" and error["hook"] == "register_tools"
    assert error["consequence"] == "no_tools" and error["error_type"] == error_type
    assert run(ledger.content(error["error_digest"])) is not None
    assert run(ledger.verify()).ok


def test_an_async_register_tools_is_a_recorded_failure_not_a_crash() -> None:
    class Async:
        @hookimpl
        async def register_tools(self) -> list[Any]:
            return []

    host = PluginHost()
    host.register(Async(), "async")
    assert tool_names(host) == []
    assert host.problems[0].consequence == "no_tools"


def test_a_plugin_model_can_be_the_runtimes_model_by_name(tmp_path: Path) -> None:
    class Models:
        @hookimpl
        def register_models(self) -> list[Any]:
            return [ScriptedModel(["from the plugin"], name="plugged-model")]

    path = tmp_path / "models_plugin.py"
    path.write_text("from overt.hooks import hookimpl\n"
                    "from overt.models.fake import ScriptedModel\n\n\n"
                    "@hookimpl\ndef register_models():\n"
                    "    return [ScriptedModel(['from the plugin'], name='plugged-model')]\n")
    config = Config(db=str(tmp_path / "l.db"), model="plugged-model", transcript="",
                    plugins_enabled=("models_plugin",), plugin_files=(str(path),))
    runtime = Runtime.from_config(config)
    try:
        assert run(runtime.respond(cli_message())).text == "from the plugin"
    finally:
        run(runtime.close())


def test_list_plugins_reports_status_and_hooks_without_enabling_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed(tmp_path, monkeypatch, "listed", "listed_plugin_mod")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('nope')\n")
    infos = {i.name: i for i in list_plugins(
        enabled=["listed"], disabled=["builtin"], plugin_files=[str(broken)])}
    assert infos["builtin"].status == "disabled"
    assert infos["listed"].status == "enabled"
    assert infos["listed"].hooks == ("pre_tool_call", "register_tools")
    assert infos["broken"].status == "available" and "RuntimeError" in (infos["broken"].error
                                                                        or "")
