"""The prefix cache with real weights: a process that loads the saved prefix answers as a
cold one does (greedy decoding). Runs on the prepared default model; about a minute on a
quiet 2-core CPU."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from overt.models.assets import DEFAULT_ASSET, asset_path, is_prepared
from overt.models.local import LocalModel
from overt.prompts import default_template, render
from overt.tools.builtin import builtin_tools
from overt.types import Message, ModelRequest, ModelResponse
from tests import needs

needs.module("llama_cpp", reason="llama_cpp is not installed: pip install 'overt[local]'")

pytestmark = pytest.mark.real_model

TOOLS = tuple(t.spec for t in builtin_tools())
REQUEST = ModelRequest((Message("system", render(default_template(), TOOLS, 5)),
                        Message("user", "How much did I spend over the last 7 days?")), TOOLS)


def _weights() -> Path:
    cache_dir = os.environ.get("OVERT_CACHE_DIR") or None
    if not is_prepared(DEFAULT_ASSET, cache_dir):
        needs.missing("the embedded model is not prepared: overt model prepare local")
    return asset_path(DEFAULT_ASSET, cache_dir)


def _first_reply(prefix_cache: bool | Path) -> ModelResponse:
    model = LocalModel(_weights(), prefix_cache=prefix_cache)
    return asyncio.run(model.complete(REQUEST))


def test_a_prefix_loaded_from_disk_gives_the_same_first_reply_as_a_cold_prefill(
        tmp_path: Path) -> None:
    cold = _first_reply(False)
    saving = _first_reply(tmp_path)
    loaded = _first_reply(tmp_path)
    assert (cold.info["prefix"], saving.info["prefix"], loaded.info["prefix"]) == (
        "none", "prefilled", "disk")
    assert len(list(tmp_path.glob("*.kv"))) == 1
    for reply in (saving, loaded):
        assert reply.text == cold.text
        assert [(c.name, dict(c.arguments)) for c in reply.tool_calls] == [
            (c.name, dict(c.arguments)) for c in cold.tool_calls]
