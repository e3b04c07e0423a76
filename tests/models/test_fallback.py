"""FallbackModel: the next model on a provider error, on the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.config import Config, Route
from overt.errors import ModelError, UsageError
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.models.fallback import FallbackModel
from overt.models.options import ModelAlias
from overt.runtime import Runtime
from overt.types import Message, ModelRequest
from tests.conftest import cli_message, run
from tests.hooks.conftest import records

ASK = ModelRequest((Message("user", "hi"),))


def test_the_first_model_answers_when_it_can_and_nothing_is_added() -> None:
    first, second = ScriptedModel(["one"], name="a"), ScriptedModel(["two"], name="b")
    response = run(FallbackModel([first, second]).complete(ASK))
    assert response.text == "one" and response.model == "a" and "fallback_from" not in \
        response.info
    assert second.requests == []


def test_a_provider_error_moves_to_the_next_model_and_says_so_in_info() -> None:
    first = ScriptedModel([ModelError("503 from upstream")], name="a")
    second = ScriptedModel(["two"], name="b")
    model = FallbackModel([first, second])
    assert model.name == "a"
    response = run(model.complete(ASK))
    assert response.text == "two" and response.model == "b"
    assert response.info["fallback_from"] == ["a"]
    assert response.info["fallback_errors"] == ["ModelError"]


def test_when_every_model_fails_the_error_names_each() -> None:
    model = FallbackModel([ScriptedModel([ModelError("down")], name="a"),
                           ScriptedModel([], name="b")])
    with pytest.raises(ModelError) as caught:
        run(model.complete(ASK))
    assert "a: ModelError: down" in str(caught.value)
    assert "b: ModelError: b: no scripted reply left" in str(caught.value)


def test_an_adapter_bug_is_not_a_provider_error_and_propagates() -> None:
    model = FallbackModel([ScriptedModel([KeyError("bug")], name="a"),
                           ScriptedModel(["two"], name="b")])
    with pytest.raises(KeyError):
        run(model.complete(ASK))


def test_a_fallback_of_no_models_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        FallbackModel([])


def test_the_inference_record_names_the_model_that_answered_and_the_one_that_failed(
    ledger: Ledger,
) -> None:
    model = FallbackModel([ScriptedModel([ModelError("rate limited")], name="a"),
                           ScriptedModel(["two"], name="b")])
    result = run(Runtime(model=model, ledger=ledger).respond(cli_message()))
    assert result.text == "two" and result.error is None
    [inference] = records(ledger, "inference")
    assert inference["model"] == "b"
    assert inference["info"]["fallback_from"] == ["a"]
    assert inference["info"]["fallback_errors"] == ["ModelError"]
    assert run(ledger.verify()).ok


def test_a_route_s_fallback_list_wraps_its_model(ledger_url: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    backup = tmp_path / "backup.jsonl"
    backup.write_text(json.dumps({"text": "from the backup"}) + "\n")
    config = Config(db=ledger_url, transcript="", route="main", model="primary",
                    model_aliases={"primary": ModelAlias(f"scripted:{empty}")},
                    routes={"main": Route(fallback=(f"scripted:{backup}",))})
    runtime = Runtime.from_config(config)
    try:
        assert isinstance(runtime.model, FallbackModel)
        result = run(runtime.respond(cli_message()))
        assert result.text == "from the backup"
        [inference] = run(runtime.ledger.entries(kinds=["inference"]))
        assert inference.data["model"] == "scripted:backup.jsonl"
        assert inference.data["info"]["fallback_from"] == ["scripted:empty.jsonl"]
    finally:
        run(runtime.close())


def test_a_fallback_streams_through_the_model_that_answers() -> None:
    first = ScriptedModel([ModelError("rate limited")], name="a")
    second = ScriptedModel(["two words"], name="b")
    pieces: list[str] = []
    response = run(FallbackModel([first, second]).complete_stream(ASK, pieces.append))
    assert pieces == ["two ", "words"] and "".join(pieces) == response.text
    assert response.model == "b" and response.info["fallback_from"] == ["a"]
