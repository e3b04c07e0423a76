from __future__ import annotations

import pytest

from overt.config import Config
from overt.errors import ConfigError


def test_plugin_lists_come_from_comma_separated_variables() -> None:
    config = Config.from_env({"OVERT_DB": "x.db", "OVERT_PLUGINS_ENABLED": "a, b,,c",
                              "OVERT_PLUGINS_DISABLED": "builtin",
                              "OVERT_PLUGIN_FILES": "/p/one.py,/p/two.py",
                              "OVERT_PRE_TOOL_CALL_TIMEOUT_S": "0.5"})
    assert config.plugins_enabled == ("a", "b", "c")
    assert config.plugins_disabled == ("builtin",)
    assert config.plugin_files == ("/p/one.py", "/p/two.py")
    assert config.pre_tool_call_timeout_s == 0.5


def test_no_plugin_is_enabled_by_default() -> None:
    config = Config.from_env({"OVERT_DB": "x.db"})
    assert config.plugins_enabled == () and config.plugins_disabled == ()


def test_a_plugin_list_given_as_one_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        Config(db="x.db", plugins_enabled="example")  # type: ignore[arg-type]


def test_a_non_positive_hook_timeout_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        Config.from_env({"OVERT_DB": "x.db", "OVERT_PRE_TOOL_CALL_TIMEOUT_S": "0"})
