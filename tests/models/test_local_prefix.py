"""LocalModel's use of the prefix cache, against a fake ``llama_cpp`` with a state API."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from overt.models import llama_sampling
from overt.models.local import LocalModel
from overt.types import Message, ModelRequest, ModelResponse
from tests.models.test_local import TOOLS, FakeGrammar, FakeLlama

SYSTEM = Message("system", "You are overt, the operator's assistant. " * 4)


class StatefulLlama(FakeLlama):
    """Keeps the tokens evaluated; its state is those tokens, as bytes."""

    def __init__(self, model_path: str, **kwargs: Any) -> None:
        super().__init__(model_path, **kwargs)
        self.input_ids = [0] * 8192
        self.n_tokens = 0
        self.ctx = self
        self.prefilled = 0
        self.restored: bytes | None = None

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens: list[int]) -> None:
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self.prefilled += len(tokens)

    def state(self) -> bytes:
        return b",".join(str(t).encode() for t in self.input_ids[:self.n_tokens])


def _get_size(ctx: StatefulLlama) -> int:
    return len(ctx.state())


def _get_data(ctx: StatefulLlama, buffer: Any, size: int) -> int:
    data = ctx.state()
    ctypes.memmove(buffer, data, len(data))
    return len(data)


def _set_data(ctx: StatefulLlama, buffer: Any, size: int) -> int:
    ctx.restored = ctypes.string_at(buffer, size)
    return size


@pytest.fixture
def stateful_llama(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("llama_cpp")
    grammar_module = types.ModuleType("llama_cpp.llama_grammar")
    grammar_module.LlamaGrammar = FakeGrammar  # type: ignore[attr-defined]
    module.Llama = StatefulLlama  # type: ignore[attr-defined]
    module.__version__ = "0.0-fake"  # type: ignore[attr-defined]
    module.llama_grammar = grammar_module  # type: ignore[attr-defined]
    module.llama_state_get_size = _get_size  # type: ignore[attr-defined]
    module.llama_state_get_data = _get_data  # type: ignore[attr-defined]
    module.llama_state_set_data = _set_data  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_grammar", grammar_module)
    monkeypatch.setattr(FakeLlama, "made", [])
    monkeypatch.setattr(llama_sampling, "sample_tokens",
                        lambda llm, tokens, **kw: llm.generate(tokens, grammar=kw["grammar"]))


def _model(tmp_path: Path, **options: Any) -> LocalModel:
    FakeLlama.script = staticmethod(lambda prompt, grammar: "Hi.")  # type: ignore[assignment]
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"not really a gguf")
    return LocalModel(weights, n_ctx=8192, **options)


def made() -> list[StatefulLlama]:
    """The llama.cpp models the test's LocalModels loaded, in order (through the fake)."""
    return [llm for llm in FakeLlama.made if isinstance(llm, StatefulLlama)]


def _ask(model: LocalModel, question: str = "How much did I spend?") -> ModelResponse:
    return asyncio.run(model.complete(ModelRequest((SYSTEM, Message("user", question)), TOOLS)))


def test_the_first_process_prefills_the_system_turn_and_saves_it_beside_the_weights(
        tmp_path: Path, stateful_llama: None) -> None:
    model = _model(tmp_path)
    assert _ask(model).info["prefix"] == "prefilled"
    assert len(list((tmp_path / "prefix").glob("*.kv"))) == 1
    [llm] = made()
    assert llm.prefilled == llm.n_tokens > 64


def test_a_new_process_loads_the_saved_prefix_instead_of_prefilling(
        tmp_path: Path, stateful_llama: None) -> None:
    first = _model(tmp_path)
    _ask(first)
    second = _model(tmp_path)
    assert _ask(second).info["prefix"] == "disk"
    loaded_first, loaded_second = made()
    assert loaded_second.prefilled == 0 and loaded_second.restored == loaded_first.state()


def test_the_next_request_in_one_process_keeps_the_prefix_it_holds(
        tmp_path: Path, stateful_llama: None) -> None:
    model = _model(tmp_path)
    _ask(model)
    assert _ask(model, "And this week?").info["prefix"] == "held"


def test_a_corrupt_cache_file_is_logged_prefilled_again_and_rewritten(
        tmp_path: Path, stateful_llama: None, caplog: pytest.LogCaptureFixture) -> None:
    _ask(_model(tmp_path))
    [saved] = (tmp_path / "prefix").glob("*.kv")
    saved.write_bytes(saved.read_bytes()[:-3])
    with caplog.at_level(logging.WARNING, logger="overt.models.prefix_cache"):
        assert _ask(_model(tmp_path)).info["prefix"] == "prefilled"
    assert "refused, rebuilding" in caplog.text
    assert _ask(_model(tmp_path)).info["prefix"] == "disk"


def test_without_the_prefix_cache_nothing_is_saved(tmp_path: Path,
                                                   stateful_llama: None) -> None:
    assert _ask(_model(tmp_path, prefix_cache=False)).info["prefix"] == "none"
    assert not (tmp_path / "prefix").exists()


def test_a_named_directory_holds_the_cache(tmp_path: Path, stateful_llama: None) -> None:
    _ask(_model(tmp_path, prefix_cache=tmp_path / "kv"))
    assert len(list((tmp_path / "kv").glob("*.kv"))) == 1


def test_a_prefix_switched_away_from_and_back_comes_from_memory(
        tmp_path: Path, stateful_llama: None) -> None:
    model = _model(tmp_path)
    _ask(model)
    other = Message("system", "You are another assistant, with other rules. " * 4)
    asyncio.run(model.complete(ModelRequest((other, Message("user", "hi")), TOOLS)))
    for saved in (tmp_path / "prefix").glob("*.kv"):
        saved.unlink()  # memory, not the file: a deleted file does not matter
    assert _ask(model).info["prefix"] == "memory"
    [llm] = made()
    assert llm.restored is not None and llm.prefilled > 0


def test_a_state_llama_refuses_is_dropped_from_memory_and_prefilled_again(
        tmp_path: Path, stateful_llama: None, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model(tmp_path)
    _ask(model)
    other = Message("system", "You are another assistant, with other rules. " * 4)
    asyncio.run(model.complete(ModelRequest((other, Message("user", "hi")), TOOLS)))
    monkeypatch.setattr(sys.modules["llama_cpp"], "llama_state_set_data",
                        lambda ctx, buffer, size: 0)
    assert _ask(model).info["prefix"] == "prefilled"


def test_warm_saves_the_system_turn_and_the_first_question_finds_its_prefix_held(
        tmp_path: Path, stateful_llama: None) -> None:
    model = _model(tmp_path)
    model.warm(ModelRequest((SYSTEM,), TOOLS))
    assert len(list((tmp_path / "prefix").glob("*.kv"))) == 1  # the call turn's
    [llm] = made()
    prefilled = llm.prefilled
    assert _ask(model).info["prefix"] == "held"
    assert llm.prefilled - prefilled < 64  # only the question, not the system turn
