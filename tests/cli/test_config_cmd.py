"""``overt config check`` / ``overt config show``, and ``--config`` for every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.cli.main import main

TOML = """\
db = "ledger.db"
route = "cheap"

[models.cheap]
spec = "scripted:cheap.jsonl"

[models.strong]
spec = "scripted:strong.jsonl"
api_key_env = "TEST_STRONG_KEY"

[routes.cheap]
model = "cheap"
escalate_to = "strong"

[budget]
day_usd = 2.5
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OVERT_CONFIG", "OVERT_DB", "OVERT_MODEL", "OVERT_ROUTE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # scripted:FILE specs are relative to the working folder
    (tmp_path / "cheap.jsonl").write_text(json.dumps({"text": "I'm not sure: 5"}) + "\n")
    (tmp_path / "strong.jsonl").write_text(json.dumps({"text": "4"}) + "\n")
    path = tmp_path / "overt.toml"
    path.write_text(TOML)
    return path


def test_check_prints_ok_and_a_summary_and_exits_0(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "check", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok: {config}: model cheap, route cheap; escalates to strong")
    assert "day_usd=2.5" in out


def test_check_finds_overt_toml_in_the_working_folder(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "check"]) == 0
    assert capsys.readouterr().out.startswith("ok: ")


def test_check_prints_every_problem_with_its_line_and_exits_2(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(TOML.replace('escalate_to = "strong"', 'escalate_to = "strongg"')
                      .replace("day_usd = 2.5", "day_usd = -1\nweekly_usd = 3"))
    assert main(["--config", str(config), "config", "check"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{config}:13: routes.cheap.escalate_to: unknown model 'strongg'")
    assert err[1] == f"{config}:16: budget.day_usd: Input should be greater than or equal to 0"
    assert err[2].startswith(f"{config}:17: budget.weekly_usd: unknown key (allowed: ")


def test_check_names_an_enabled_plugin_that_is_not_installed(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(TOML + '\n[plugins]\nenabled = ["nosuch"]\n')
    assert main(["config", "check", "--config", str(config)]) == 2
    assert capsys.readouterr().err.startswith(
        f"{config}:19: plugins.enabled[0]: no installed plugin 'nosuch'")


def test_check_without_a_file_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OVERT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["config", "check"]) == 2
    assert "no config file" in capsys.readouterr().err
    assert main(["config", "check", "--config", str(tmp_path / "missing.toml")]) == 2


def test_show_prints_the_effective_config_with_secrets_masked(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEST_STRONG_KEY", "sk-very-secret")
    monkeypatch.setenv("OVERT_DB", "from-env.db")
    assert main(["config", "show", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["db"] == "from-env.db"  # env over the file
    assert view["model_aliases"]["strong"]["settings"]["api_key"] == "********"
    assert view["routes"]["cheap"]["escalate_to"] == "strong"
    assert main(["--db", "flag.db", "config", "show"]) == 0
    text = capsys.readouterr().out
    assert 'db = "flag.db"' in text and "sk-very-secret" not in text
    assert "[routes.cheap]" in text


def test_ask_answers_on_the_file_s_route_and_escalates(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "what is 2 + 2?"]) == 0
    assert capsys.readouterr().out.strip() == "4"


def test_an_invalid_file_stops_any_command_with_exit_2(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(TOML.replace('route = "cheap"', 'route = 3'))
    assert main(["ask", "hi"]) == 2
    assert "overt.toml:2: route: Input should be a valid string" in capsys.readouterr().err
