from __future__ import annotations

from pathlib import Path

import pytest

from overt.config import Config
from overt.errors import ConfigError
from overt.ledger import open_ledger
from overt.models.fake import ScriptedModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.prompts import default_template, load_template, render
from overt.runtime import Runtime
from overt.tools.base import ToolContext, tool
from overt.tools.builtin import builtin_tools
from tests.conftest import cli_message, run


def test_the_shipped_prompt_lists_each_offered_tool_with_when_to_use_it() -> None:
    tools = tuple(t.spec for t in builtin_tools())
    prompt = render(default_template(), tools, 5)
    for spec in tools:
        assert f"`{spec.name}`: {spec.description.split('. ')[0]}" in prompt
        assert f"): `{spec.name}`." in prompt or f"`{spec.name}`. Its period" in prompt
    assert "At most\n  5 tool calls per response" in prompt


def test_the_routing_lines_name_only_the_tools_offered() -> None:
    usage = tuple(t.spec for t in builtin_tools() if t.name == "get_usage")
    prompt = render(default_template(), usage, 5)
    assert "`get_usage`. Its period is today" in prompt
    assert "node_create" not in prompt and "get_operational_state" not in prompt
    assert "Greetings, thanks, arithmetic, unit conversions, explaining what a term means, " \
        "code: no tool." in prompt


@pytest.mark.parametrize("rule", [
    "Never pre-announce", "never guess a value", "State only numbers that a tool returned",
    "you cannot do it from\nhere",
])
def test_the_shipped_prompt_states_each_rule(rule: str) -> None:
    assert rule in default_template()


def test_the_shipped_prompt_never_claims_the_agent_only_reads() -> None:
    assert "only read" not in default_template()


def _prompt_of(runtime: Runtime) -> str:
    return runtime.engine.system_prompt


def test_under_the_default_policy_the_prompt_says_the_agent_writes_its_own_memory(
        tmp_path: Path) -> None:
    runtime = Runtime(model=ScriptedModel([]), ledger=open_ledger(str(tmp_path / "l.db")))
    prompt = _prompt_of(runtime)
    assert ("You may change, without asking: `node_create`, `node_supersede`, "
            "`link_create`, `link_retract`. Your memory is yours to write") in prompt
    assert "You may read freely: `get_operational_state`, `get_usage`" in prompt
    assert "approval before" not in prompt
    run(runtime.close())


def test_a_policy_that_holds_memory_writes_is_told_to_the_model_as_approval(
        tmp_path: Path) -> None:
    hold = Rule("hold.memory", "ask", "memory_needs_review", "a human reviews memory",
                tools=("node_create", "node_supersede", "link_create", "link_retract"))
    runtime = Runtime(model=ScriptedModel([]), ledger=open_ledger(str(tmp_path / "l.db")),
                      gate=Gate(Policy([hold])))
    prompt = _prompt_of(runtime)
    assert ("wait for the operator's approval before they run; call them when asked, and "
            "say the change is waiting for approval: `node_create`, `node_supersede`, "
            "`link_create`, `link_retract`.") in prompt
    assert "You may change, without asking" not in prompt
    run(runtime.close())


def test_a_mutating_tool_the_policy_asks_about_is_listed_as_needing_approval(
        tmp_path: Path) -> None:
    @tool()
    async def restart_worker(ctx: ToolContext, name: str) -> str:
        """Restart a worker."""
        return name

    runtime = Runtime(model=ScriptedModel([]), ledger=open_ledger(str(tmp_path / "l.db")),
                      tools=[restart_worker])
    assert "say the change is waiting for approval: `restart_worker`." in _prompt_of(runtime)
    run(runtime.close())


def test_a_tool_the_agent_lacks_the_capability_for_is_listed_as_not_allowed(
        tmp_path: Path) -> None:
    gate = Gate(capabilities=Capabilities({"agent:*": ["runtime.read", "usage.read",
                                                       "memory.read"]}))
    runtime = Runtime(model=ScriptedModel([]), ledger=open_ledger(str(tmp_path / "l.db")),
                      gate=gate)
    assert ("Not allowed here: `node_create`, `node_supersede`, `link_create`, "
            "`link_retract`.") in _prompt_of(runtime)
    run(runtime.close())


def test_the_prompt_can_be_overridden_by_a_file_named_in_config(tmp_path: Path) -> None:
    custom = tmp_path / "prompt.md"
    custom.write_text("Only $max_tool_calls calls. Tools:\n$tools")
    config = Config(db=str(tmp_path / "l.db"), system_prompt=str(custom))
    model = ScriptedModel(["hi"])
    runtime = Runtime.from_config(config, model=model)
    run(runtime.respond(cli_message()))
    system = model.requests[0].messages[0]
    assert system.role == "system" and system.content.startswith("Only 5 calls. Tools:\n- `get_")
    run(runtime.close())


def test_a_missing_prompt_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read system prompt"):
        load_template(tmp_path / "missing.md")
