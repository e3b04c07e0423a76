"""Policy rules and the rule table: defaults, priorities, argument conditions."""

from __future__ import annotations

import pytest

from overt.errors import ConfigError
from overt.policy.engine import Policy
from overt.policy.rules import Condition, Rule, rule_from_mapping


def decide(policy: Policy, tool: str = "write_file", args: dict[str, object] | None = None,
           *, source: str = "cli", route: str = "default", actor: str = "agent:default",
           mutating: bool = True) -> tuple[str, str, str]:
    d = policy.decide(tool, args or {}, source=source, route=route, actor=actor,
                      mutating=mutating)
    return d.effect, d.reason_code, d.rule


def test_defaults_allow_read_only_tools_from_every_source() -> None:
    for source in ("cli", "http", "slack_dm", "email", "mcp"):
        assert decide(Policy(), "get_usage", source=source, mutating=False)[0] == "allow"


def test_defaults_deny_mutating_tools_on_dm_sources() -> None:
    for source in ("slack_dm", "email"):
        assert decide(Policy(), source=source) == ("deny", "mutating_on_dm",
                                                   "default.mutating_on_dm")


def test_defaults_ask_before_mutating_tools_elsewhere() -> None:
    for source in ("cli", "http", "mcp"):
        assert decide(Policy(), source=source) == ("ask", "mutating_needs_approval",
                                                   "default.mutating_needs_approval")


def test_memory_writes_are_allowed_by_default_but_not_other_writes() -> None:
    assert decide(Policy(), "node_create")[0] == "allow"
    assert decide(Policy(), "node_create", source="slack_dm")[0] == "allow"
    assert decide(Policy(), "node_delete_everything")[0] == "ask"


def test_higher_priority_rules_are_checked_first_and_the_first_match_decides() -> None:
    policy = Policy([
        Rule("low", "allow", "low", priority=1, tools=("write_*",)),
        Rule("high", "deny", "high", priority=10, tools=("write_file",)),
    ])
    effect, reason, rule = decide(policy)
    assert (effect, reason, rule) == ("deny", "high", "high")
    assert decide(policy, "write_log")[2] == "low"


def test_rules_of_equal_priority_keep_config_order() -> None:
    policy = Policy([Rule("first", "quarantine", "a"), Rule("second", "allow", "b")])
    assert decide(policy)[2] == "first"


def test_the_decision_names_the_rules_evaluated_up_to_the_one_that_fired() -> None:
    policy = Policy([
        Rule("big", "deny", "too_big", priority=5, when=(Condition("size", "gt", 100),)),
        Rule("other_tool", "deny", "x", priority=4, tools=("rm",)),
        Rule("ok", "allow", "fine", priority=3),
    ])
    d = policy.decide("write_file", {"size": 1}, source="cli", route="default",
                      actor="agent:default", mutating=True)
    assert d.rule == "ok" and d.rules_evaluated == ("big", "ok")


@pytest.mark.parametrize(("op", "value", "args", "fires"), [
    ("eq", "prod", {"env": "prod"}, True),
    ("eq", "prod", {"env": "dev"}, False),
    ("ne", "prod", {"env": "dev"}, True),
    ("in", ["a", "b"], {"env": "b"}, True),
    ("not_in", ["a", "b"], {"env": "c"}, True),
    ("glob", "/etc/*", {"env": "/etc/passwd"}, True),
    ("regex", r"^rm\s", {"env": "rm -rf /"}, True),
    ("gt", 10, {"env": 11}, True),
    ("gt", 10, {"env": "11"}, False),  # a string is never ordered against a number
    ("le", 10, {"env": 10}, True),
    ("exists", None, {"env": None}, True),
    ("exists", None, {}, False),
    ("absent", None, {}, True),
    ("contains", "secret", {"env": "top secret"}, True),
    ("contains", "x", {"env": ["x", "y"]}, True),
])
def test_argument_conditions(op: str, value: object, args: dict[str, object],
                             fires: bool) -> None:
    policy = Policy([Rule("r", "deny", "cond", when=(Condition("env", op, value),))],
                    defaults=False)
    assert (decide(policy, args=args)[2] == "r") is fires


def test_conditions_read_dotted_paths_and_all_must_hold() -> None:
    rule = Rule("prod_big", "deny", "prod_big", when=(
        Condition("target.env", "eq", "prod"), Condition("target.rows", "ge", 1000)))
    policy = Policy([rule])
    assert decide(policy, args={"target": {"env": "prod", "rows": 5000}})[2] == "prod_big"
    assert decide(policy, args={"target": {"env": "prod", "rows": 5}})[2] != "prod_big"
    assert decide(policy, args={"target": "prod"})[2] != "prod_big"


def test_rules_match_on_source_route_actor_and_mutating() -> None:
    policy = Policy([
        Rule("mcp_only", "deny", "mcp", sources=("mcp",)),
        Rule("ops_route", "allow", "ops", routes=("ops*",)),
        Rule("trusted", "allow", "trusted", actors=("agent:trusted",)),
    ])
    assert decide(policy, source="mcp")[2] == "mcp_only"
    assert decide(policy, route="ops-east")[2] == "ops_route"
    assert decide(policy, actor="agent:trusted")[2] == "trusted"
    assert decide(policy)[2] == "default.mutating_needs_approval"


def test_a_policy_without_defaults_denies_what_no_rule_matches() -> None:
    assert decide(Policy(defaults=False))[:2] == ("deny", "no_rule_matched")


def test_decisions_never_raise_on_odd_arguments() -> None:
    policy = Policy([Rule("r", "deny", "x", when=(Condition("a.b.0", "gt", 1),
                                                   Condition("a", "regex", "x")))])
    for args in ({}, {"a": None}, {"a": [1, 2]}, {"a": {"b": ["9"]}}, {"a": float("nan")}):
        decide(policy, args=args)


@pytest.mark.parametrize(("data", "message"), [
    ({"name": "r", "effect": "maybe", "reason_code": "x"}, "effect"),
    ({"name": "r", "effect": "deny", "reason_code": "Bad Code"}, "reason_code"),
    ({"name": "r", "effect": "deny"}, "reason_code is required"),
    ({"name": "r", "effect": "deny", "reason_code": "x", "sources": ["fax"]}, "source"),
    ({"name": "r", "effect": "deny", "reason_code": "x",
      "when": [{"arg": "a", "op": "almost"}]}, "unknown op"),
    ({"name": "r", "effect": "deny", "reason_code": "x",
      "when": [{"arg": "a", "op": "gt", "value": "ten"}]}, "number"),
    ({"name": "r", "effect": "deny", "reason_code": "x",
      "when": [{"arg": "a", "op": "regex", "value": "("}]}, "bad regex"),
])
def test_malformed_rules_are_config_errors_that_say_what_is_wrong(
        data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        rule_from_mapping(data)


def test_rule_names_must_be_unique() -> None:
    with pytest.raises(ConfigError, match="unique"):
        Policy([Rule("a", "deny", "x"), Rule("a", "allow", "y")])
