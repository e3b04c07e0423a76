from __future__ import annotations

from pathlib import Path

import pytest

from overt.config import Config
from overt.errors import ConfigError
from overt.models.fake import ScriptedModel
from overt.prompts import default_template, load_template, render
from overt.runtime import Runtime
from overt.tools.builtin import builtin_tools
from tests.conftest import cli_message, run


def test_the_shipped_prompt_lists_each_offered_tool_with_when_to_use_it() -> None:
    tools = tuple(t.spec for t in builtin_tools())
    prompt = render(default_template(), tools, 5)
    for spec in tools:
        assert f"`{spec.name}`: {spec.description}" in prompt
    assert "At most 5 tool calls per response" in prompt


@pytest.mark.parametrize("rule", [
    "Never pre-announce", "Cost awareness", "Cite returned values as they are",
    "In this conversation you only read",
])
def test_the_shipped_prompt_states_each_rule(rule: str) -> None:
    assert rule in default_template()


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
