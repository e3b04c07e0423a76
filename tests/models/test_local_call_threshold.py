"""LocalModel's call threshold: a tool call the model finds likely enough at the first
token of its reply is made, even where its most likely first token starts an answer.
On the fake llama of test_local.py, with the first token's logits set by each test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.models.test_local import QUESTION, FakeLlama, _ask, _model, loaded
from tests.models.test_local import fake_llama as fake_llama  # the fixture

N_VOCAB = 2000
BRACE = 1000 + ord("{")  # the fake's token for "{", a call's opening
TOOL_CALL = 1  # the fake's <tool_call>


def _script(prompt: str, grammar: Any) -> str:
    if grammar is not None:
        return '{"name": "get_usage", "arguments": {"period": "7d"}}'
    if prompt.endswith("</tool_call>"):
        return ""
    return "The burn is whatever you like."


@pytest.fixture
def logits(fake_llama: type[FakeLlama], monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The logits the fake reports for the reply's first token (uniform until set)."""
    import sys

    row = [0.0] * N_VOCAB
    monkeypatch.setattr(FakeLlama, "ctx", "fake-ctx", raising=False)
    monkeypatch.setattr(FakeLlama, "n_vocab", lambda self: N_VOCAB, raising=False)
    monkeypatch.setattr(sys.modules["llama_cpp"], "llama_get_logits",
                        lambda ctx: row if ctx == "fake-ctx" else None, raising=False)
    return row


def test_a_call_likely_enough_at_the_first_token_is_made_under_the_grammar(
    tmp_path: Path, logits: list[float],
) -> None:
    logits[BRACE] = 3.0  # about 1% of the first token's probability
    model = _model(tmp_path, _script)
    response = _ask(model, QUESTION)
    assert [(c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("get_usage", {"period": "7d"})]
    assert response.text == ""
    constrained = [p for p, g in loaded().calls if g is not None]
    assert constrained == [loaded().calls[1][0]]
    assert constrained[0].endswith("<|im_start|>assistant\n<tool_call>\n")


def test_a_call_below_the_threshold_leaves_the_answer_as_decoded(
    tmp_path: Path, logits: list[float],
) -> None:
    model = _model(tmp_path, _script)  # the openings hold 2/2000 = 0.1%
    response = _ask(model, QUESTION)
    assert response.tool_calls == ()
    assert response.text == "The burn is whatever you like."


def test_the_tool_call_token_counts_among_a_calls_openings(
    tmp_path: Path, logits: list[float],
) -> None:
    logits[TOOL_CALL] = 3.0
    response = _ask(_model(tmp_path, _script), QUESTION)
    assert [c.name for c in response.tool_calls] == ["get_usage"]


def test_a_threshold_of_zero_turns_the_check_off(
    tmp_path: Path, logits: list[float],
) -> None:
    logits[BRACE] = 3.0
    response = _ask(_model(tmp_path, _script, call_threshold=0.0), QUESTION)
    assert response.tool_calls == ()
    assert response.text == "The burn is whatever you like."


def test_without_tools_no_call_is_forced(tmp_path: Path, logits: list[float]) -> None:
    logits[BRACE] = 3.0
    response = _ask(_model(tmp_path, _script), QUESTION, tools=())
    assert response.tool_calls == ()
    assert response.text == "The burn is whatever you like."
