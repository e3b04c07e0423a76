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


def test_a_server_ledger_keeps_its_transcript_in_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object,
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    from overt.config import default_data_dir

    config = Config.from_env({"OVERT_DB": "postgresql://127.0.0.1:5432/test?schema=x"})
    assert config.transcript_path == default_data_dir() / "transcript.jsonl"
    assert "127.0.0.1" not in str(config.transcript_path)
    assert Config(db="/srv/overt/ledger.db").transcript_path is not None
    assert str(Config(db="/srv/overt/ledger.db").transcript_path) == "/srv/overt/transcript.jsonl"


def test_the_agent_has_one_name_whatever_the_route() -> None:
    assert Config.from_env({"OVERT_DB": "x.db", "OVERT_AGENT": "ada"}).agent == "ada"
    assert Config(db="x.db", route="ops").agent == "default"
    with pytest.raises(ConfigError, match="agent must be a name"):
        Config(db="x.db", agent="agent:ada")


@pytest.mark.parametrize("name", ["OVERT_TOOL_TIMEOUT_S", "OVERT_PRE_TOOL_CALL_TIMEOUT_S"])
def test_a_timeout_variable_of_nan_is_refused_not_taken_as_a_timeout(name: str) -> None:
    # NaN passed the "must be positive" check (NaN <= 0 is false)
    with pytest.raises(ConfigError, match="nan"):
        Config.from_env(env={name: "nan"})
