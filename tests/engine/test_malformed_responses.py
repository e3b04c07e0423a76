"""A model adapter that returns a response of the wrong shape: a model failure on the
record, never an exception out of the turn (which left it without turn.completed)."""

from __future__ import annotations

from typing import Any

import pytest

from overt.events import InferenceRecorded, TurnCompleted
from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel
from overt.types import ModelRequest, ModelResponse, ToolCall, Usage
from tests.conftest import RuntimeFactory, cli_message, run


def _response(**fields: Any) -> ModelResponse:
    return ModelResponse(**{"text": "ok", "usage": Usage(1, 1), "model": "m", **fields})


class _RawModel:
    """A model whose ``complete`` returns whatever it was given, unchecked."""

    name, context_window = "raw", None

    def __init__(self, reply: object) -> None:
        self.reply = reply

    async def complete(self, request: ModelRequest) -> Any:
        return self.reply


MALFORMED = {
    "text None": _response(text=None),
    "tool_calls None": _response(tool_calls=None),
    "a call as a dict": _response(tool_calls=({"name": "get_usage", "arguments": {}},)),
    "a call named None": _response(tool_calls=(ToolCall("c1", None, {}),)),  # type: ignore[arg-type]
    "usage None": _response(usage=None),
    "usage of strings": _response(usage=Usage("a", "b")),  # type: ignore[arg-type]
    "negative usage": _response(usage=Usage(-5, 0)),
    "info the ledger cannot encode": _response(info={"x": object()}),
    "a dict, not a response": {"text": "hi"},
}


@pytest.mark.slow
@pytest.mark.parametrize("reply", MALFORMED.values(), ids=list(MALFORMED))
def test_a_malformed_response_ends_the_turn_as_a_model_error_on_the_record(
        ledger: Ledger, make_runtime: RuntimeFactory, reply: object) -> None:
    result = run(make_runtime(_RawModel(reply)).respond(cli_message()))
    assert result.error is not None
    assert (result.error.kind, result.error.type) == ("model_error", "TypeError")
    assert result.tools_used is None
    [completed] = run(ledger.entries(turn_id=result.turn_id, kinds=["turn.completed"]))
    assert completed.event(TurnCompleted).status == "model_error"
    [inference] = run(ledger.entries(turn_id=result.turn_id, kinds=["inference"]))
    assert inference.event(InferenceRecorded).error_type == "TypeError"
    assert run(ledger.count("tool_call.started")) == 0  # nothing it asked for ran
    assert run(ledger.verify()).ok


def test_calls_given_as_a_list_and_none_for_optional_fields_still_work(
        ledger: Ledger, make_runtime: RuntimeFactory) -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return _response(text="done", model=None, stop_reason=None, reasoning=None)
        return _response(text="", tool_calls=[ToolCall("c1", "get_usage", {})])  # type: ignore[arg-type]
    result = run(make_runtime(FunctionModel(reply)).respond(cli_message()))
    assert (result.error, result.text, result.tools_used) == (None, "done", ["get_usage"])
    assert run(ledger.verify()).ok
