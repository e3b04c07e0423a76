from __future__ import annotations

from typing import Any

import pytest

from overt.errors import UsageError
from overt.hooks import Block, Reissue
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime


@pytest.mark.parametrize("code", ["", "has space", "x" * 65, "9starts_with_a_digit", "new\nline"])
def test_a_block_or_reissue_needs_a_short_plain_reason_code(code: str) -> None:
    with pytest.raises(UsageError):
        Block(code)
    with pytest.raises(UsageError):
        Reissue(reason_code=code)


def test_plain_codes_are_accepted() -> None:
    assert Block("usage_history_blocked").reason_code == "usage_history_blocked"
    assert Reissue(model="strong", reason_code="low-confidence.v2").model == "strong"


def test_a_runtime_without_plugins_asks_no_hook_during_a_turn(ledger: Any) -> None:
    runtime = Runtime(model=ScriptedModel(["hi"]), ledger=ledger)
    assert runtime.plugins.names == ["builtin"]
    assert runtime.engine.hooks.names() == ["register_tools", "register_models"]
    assert not runtime.engine.hooks.per_turn  # so the loop never builds a TurnHooks


@pytest.mark.parametrize(("result", "error"), [
    ('{"error": "kora_tool_dispatch_error: ConnectionError: substrate down"}',
     "kora_tool_dispatch_error: ConnectionError: substrate down"),
    (' {"error":"x_failed"}\n', "x_failed"),
    ({"error": "not yet encoded"}, "not yet encoded"),
])
def test_the_seed_error_envelope_is_read_as_the_error_it_reports(
    result: object, error: str
) -> None:
    from overt.hooks.answers import error_envelope

    assert error_envelope(result) == error


@pytest.mark.parametrize("result", [
    '{"error": "x", "partial": [1, 2]}',  # a result that mentions an error
    '{"error": ""}', '{"error": null}', '{"error": {"message": "x"}}', '{"errors": "x"}',
    '{"error": "x"', "error: x", '["error"]', "", '{"primary_state": "ready"}',
    {"error": "x", "code": 3}, {"error": 5}, ["error"], None, 7,
    '{"error": ' + '[' * 50 + ']' * 50 + '}',
])
def test_anything_else_is_a_result_like_any_other(result: object) -> None:
    from overt.hooks.answers import error_envelope

    assert error_envelope(result) is None
