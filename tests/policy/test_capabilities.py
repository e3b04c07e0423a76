"""Capability grants: what each actor holds, checked with a reason."""

from __future__ import annotations

import pytest

from overt.errors import ConfigError, UsageError
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities, tool_capability


def test_the_default_agent_holds_read_and_memory_capabilities_but_not_approvals() -> None:
    caps = Capabilities()
    agent = Actor.agent("default")
    assert caps.check(agent, "usage.read").granted
    assert caps.check(agent, "memory.write").granted
    assert caps.check(agent, "tool.anything").granted
    denied = caps.check(agent, "approvals.decide")
    assert not denied.granted and denied.reason_code == "capability_missing"
    assert "agent:default" in denied.message and "approvals.decide" in denied.message
    assert not caps.check(agent, "memory.read_cross_actor").granted


def test_the_operator_may_decide_approvals() -> None:
    assert Capabilities().check(Actor.operator("alice"), "approvals.decide").granted


def test_a_grant_for_one_route_replaces_the_grant_for_every_agent() -> None:
    caps = Capabilities({"agent:support": ["usage.read"]})
    support, other = Actor.agent("support"), Actor.agent("default")
    assert caps.check(support, "usage.read").granted
    assert not caps.check(support, "memory.write").granted
    assert caps.check(other, "memory.write").granted


def test_an_agent_wildcard_grant_replaces_the_default_agent_grant() -> None:
    caps = Capabilities({"agent:*": ["runtime.read"]})
    assert not caps.check(Actor.agent("x"), "usage.read").granted
    assert caps.check(Actor.agent("x"), "runtime.read").granted


def test_mcp_clients_hold_their_own_kinds_grant() -> None:
    caps = Capabilities({"mcp_client:claude-code": ["agent.ask", "memory.*"]})
    assert caps.check(Actor("mcp_client", "claude-code"), "memory.write").granted
    assert not caps.check(Actor("mcp_client", "other"), "memory.write").granted


def test_tools_need_their_declared_capability_or_tool_name() -> None:
    assert tool_capability("get_usage", "usage.read") == "usage.read"
    assert tool_capability("deploy", None) == "tool.deploy"


@pytest.mark.parametrize("grants", [{"robot": ["x"]}, {"agent": ["Not A Cap"]},
                                    {"agent": "usage.read"}])
def test_malformed_grants_are_config_errors(grants: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        Capabilities(grants)  # type: ignore[arg-type]


def test_actors_parse_and_print_as_kind_and_name() -> None:
    assert str(Actor.parse("mcp_client:claude-code")) == "mcp_client:claude-code"
    assert Actor.parse("operator") == Actor("operator", "default")
    with pytest.raises(UsageError):
        Actor.parse("robot:x")
