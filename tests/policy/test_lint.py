"""Policy rules that can never apply: a typo in a rule's tools or condition."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.lint import dead_rules
from overt.policy.rules import DEFAULT_RULES, Condition, Rule
from overt.runtime import Runtime
from overt.types import ToolSpec
from tests.conftest import run


def _spec(name: str, *arguments: str, **schema: Any) -> ToolSpec:
    return ToolSpec(name, "", {"type": "object", **(
        schema or {"properties": {a: {"type": "string"} for a in arguments}})})


TOOLS = [_spec("get_usage", "period"), _spec("delete_file", "path", "target"),
         _spec("drop_table", "name")]


def _rule(name: str, tools: tuple[str, ...] = ("*",), *when: Condition) -> Rule:
    return Rule(name, "deny", "test", "", tools=tools, when=when)


def test_a_rule_whose_tools_match_nothing_is_named_with_the_tools_there_are() -> None:
    (line,) = dead_rules([_rule("typo", ("get_usag",))], TOOLS)
    assert "'typo'" in line and "['get_usag']" in line and "never applies" in line
    assert "delete_file, drop_table, get_usage" in line


def test_a_condition_on_an_argument_no_matched_tool_takes_is_named() -> None:
    (line,) = dead_rules([_rule("prod", ("delete_*",),
                                Condition("targt.env", "eq", "prod"))], TOOLS)
    assert "'prod'" in line and "'targt'" in line and "'targt.env'" in line


def test_a_misspelt_actor_kind_or_route_is_named() -> None:
    agent = Rule("agents", "deny", "test", "", actors=("agnet:*", "operater"))
    route = Rule("ops", "deny", "test", "", routes=("opz*",))
    lines = dead_rules([agent, route], TOOLS, routes=["default", "ops", "ops-night"])
    assert len(lines) == 2
    assert "'agents'" in lines[0] and "name no actor kind" in lines[0]
    assert "'ops'" in lines[1] and "match no route" in lines[1] and "ops-night" in lines[1]
    assert dead_rules([route], TOOLS) == []  # no routes defined: any name may be run
    live = [Rule("a", "deny", "t", "", actors=("agent:*", "mcp_client:claude")),
            Rule("k", "deny", "t", "", actors=("*",)),
            Rule("r", "deny", "t", "", routes=("ops*",))]
    assert dead_rules(live, TOOLS, routes=["default", "ops"]) == []


def test_live_rules_absent_conditions_open_schemas_and_the_defaults_pass() -> None:
    rules = [_rule("all"), _rule("globs", ("delete_*", "drop_*")),
             _rule("nested", ("delete_*",), Condition("target.env", "eq", "prod")),
             # one matched tool taking the argument is enough
             _rule("some", ("*",), Condition("name", "eq", "users")),
             _rule("absent", ("get_usage",), Condition("nothing", "absent")),
             *DEFAULT_RULES]
    assert dead_rules(rules, TOOLS) == []
    open_schemas = [_spec("remote", type="object"),  # no properties listed
                    _spec("loose", properties={"a": {}}, additionalProperties=True)]
    assert dead_rules([_rule("any", ("*",), Condition("x", "eq", 1))], open_schemas) == []


def test_a_starting_runtime_warns_of_a_dead_rule(
        ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    gate = Gate(Policy([_rule("typo", ("get_usag",))]))
    runtime = Runtime(model=ScriptedModel(["ok"]), ledger=ledger, gate=gate)
    with caplog.at_level(logging.WARNING, logger="overt"):
        run(runtime.start())
    assert "policy rule 'typo': tools ['get_usag'] match no tool" in caplog.text
    assert "get_usage" in caplog.text  # the builtin tools are named


def test_config_check_warns_of_a_dead_rule_and_still_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from overt.cli.main import main

    monkeypatch.delenv("OVERT_CONFIG", raising=False)
    path = tmp_path / "overt.toml"
    path.write_text('[[policy.rules]]\nname = "private"\ntools = ["get_usag"]\n'
                    'effect = "ask"\nreason_code = "private"\n\n'
                    '[[policy.rules]]\nname = "weekly"\ntools = ["get_usage"]\n'
                    'effect = "deny"\nreason_code = "weekly"\n'
                    'when = [{ arg = "perod", op = "eq", value = "7d" }]\n')
    assert main(["config", "check", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ok: ")
    assert "warning: policy rule 'private': tools ['get_usag'] match no tool" in err
    assert "warning: policy rule 'weekly': no tool it matches takes an argument 'perod'" in err
