"""Typed events read back from the ledger: every event class round-trips through
both backends and comes back as the same typed value (``Entry.event``), validated;
and the JSON Schema of them all, as verifiers in other languages read it."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import jsonschema
import pytest

from overt.errors import EventDecodeError, LedgerError
from overt.events import (
    EVENT_TYPES,
    AnyEvent,
    ChannelReplied,
    Event,
    HookBlocked,
    InferenceRecorded,
    ToolCallCompleted,
    TurnStarted,
    from_entry,
    json_schema,
)
from tests.conftest import run

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "events.schema.json"


def _sample(name: str, annotation: Any) -> Any:
    """A value of ``annotation`` for the field ``name`` (distinct per field)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return get_args(annotation)[0]
    if origin in (types.UnionType, typing.Union):
        return _sample(name, next(a for a in get_args(annotation) if a is not type(None)))
    if origin is list:
        return [f"{name}-1", f"{name}-2"]
    if origin is dict:
        value = get_args(annotation)[1]
        return {"first": f"{name}-v"} if value is str else {"first": 1, "nested": {"x": [1.5]}}
    if annotation is bool:
        return True
    if annotation is int:
        return len(name)
    if annotation is float:
        return len(name) + 0.25
    if annotation is str:
        return f"sha256:{len(name):064x}" if name.endswith(("_digest", "_sha256")) else f"{name}-x"
    raise AssertionError(f"no sample for {name}: {annotation!r}")


def sample(cls: type[Event], **overrides: Any) -> Event:
    """An instance of ``cls`` with every field set (defaults too), on turn T, session S."""
    hints = typing.get_type_hints(cls)
    values = {f.name: _sample(f.name, hints[f.name]) for f in dataclasses.fields(cls)
              if f.name not in ("turn_id", "session_id")}
    return cls(turn_id="turn-T", session_id="session-S", **{**values, **overrides})


def test_the_registry_and_the_union_name_the_same_classes_by_their_kinds() -> None:
    assert set(EVENT_TYPES.values()) == set(get_args(AnyEvent))
    assert all(kind == cls.kind for kind, cls in EVENT_TYPES.items())


@pytest.mark.slow
@pytest.mark.parametrize("cls", list(EVENT_TYPES.values()), ids=list(EVENT_TYPES))
def test_every_event_class_round_trips_through_the_ledger_typed_and_equal(
        ledger: Any, cls: type[Event]) -> None:
    event = sample(cls)
    (written,) = run(ledger.record([event]))
    (read,) = run(ledger.entries(kinds=[cls.kind]))
    assert read.event() == event and type(read.event()) is cls
    assert read.event(cls) == event and written.event(cls) == event


@pytest.mark.parametrize("cls", list(EVENT_TYPES.values()), ids=list(EVENT_TYPES))
def test_every_event_class_decodes_from_its_data_as_stored_to_an_equal_event(
        cls: type[Event]) -> None:
    event = sample(cls)
    stored = json.loads(json.dumps(event.data()))  # what a backend gives back
    decoded = from_entry(cls.kind, stored, turn_id="turn-T", session_id="session-S")
    assert decoded == event and type(decoded) is cls and decoded.data() == event.data()


def test_a_field_added_after_an_entry_was_written_takes_its_default() -> None:
    data = sample(InferenceRecorded).data()
    del data["adapter_decisions"]
    inference = from_entry(InferenceRecorded.kind, data, expect=InferenceRecorded)
    assert inference.adapter_decisions == [] and inference.model == "model-x"


def test_a_turn_start_that_names_no_sender_is_a_decode_error() -> None:
    data = sample(TurnStarted).data()
    del data["actor"]
    with pytest.raises(EventDecodeError, match=r"actor: required, missing"):
        from_entry(TurnStarted.kind, data, expect=TurnStarted)


def test_a_key_the_class_does_not_have_is_left_out() -> None:
    event = sample(HookBlocked)
    data = {**event.data(), "written_by_a_later_version": 1}
    assert from_entry(HookBlocked.kind, data, turn_id="turn-T", session_id="session-S") == event


def test_an_unknown_kind_is_a_decode_error_naming_it() -> None:
    with pytest.raises(EventDecodeError, match=r"turn\.annotated") as caught:
        from_entry("turn.annotated", {})
    assert caught.value.kind == "turn.annotated" and isinstance(caught.value, LedgerError)


def test_a_missing_required_field_is_a_decode_error_naming_the_field() -> None:
    data = sample(ToolCallCompleted).data()
    del data["tool_status"]
    with pytest.raises(EventDecodeError, match=r"ToolCallCompleted: tool_status: required"):
        from_entry(ToolCallCompleted.kind, data)


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("iteration", "3", r"iteration: Input should be a valid integer \(got str '3'\)"),
    ("iteration", 3.0, r"iteration: Input should be a valid integer \(got float 3\.0\)"),
    ("escalated", 1, r"escalated: Input should be a valid boolean \(got int 1\)"),
    ("cost_usd", "0.5", r"cost_usd: Input should be a valid number \(got str '0\.5'\)"),
    ("model", None, r"model: Input should be a valid string \(got NoneType None\)"),
    ("tools_offered", "search", r"tools_offered: Input should be a valid list"),
    ("tools_offered", ["search", 2], r"tools_offered\.1: Input should be a valid string"),
    ("stop_reason", ["end"], r"stop_reason: Input should be a valid string"),
])
def test_a_field_of_another_type_is_a_decode_error_naming_it_and_what_it_held(
        field: str, value: Any, problem: str) -> None:
    data = {**sample(InferenceRecorded).data(), field: value}
    with pytest.raises(EventDecodeError, match=rf"inference entry does not fit .*{problem}"):
        from_entry(InferenceRecorded.kind, data)


def test_a_value_outside_a_literal_field_is_a_decode_error() -> None:
    data = {**sample(ToolCallCompleted).data(), "tool_status": "exploded"}
    with pytest.raises(EventDecodeError, match=r"tool_status: Input should be 'ok', "):
        from_entry(ToolCallCompleted.kind, data)


def test_an_integer_is_a_number_where_a_float_is() -> None:
    data = {**sample(InferenceRecorded).data(), "cost_usd": 0}
    assert from_entry(InferenceRecorded.kind, data, expect=InferenceRecorded).cost_usd == 0.0


def test_reading_an_entry_as_another_class_is_a_decode_error(ledger: Any) -> None:
    (entry,) = run(ledger.record([sample(ChannelReplied)]))
    with pytest.raises(EventDecodeError, match=r"channel\.replied entry is not a turn\.started"):
        entry.event(TurnStarted)


def test_the_committed_schema_file_is_the_one_the_code_gives() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == json.dumps(
        json_schema(), indent=2, ensure_ascii=False) + "\n", (
        "docs/reference/events.schema.json is stale: regenerate it with "
        "`overt ledger schema > docs/reference/events.schema.json`")


def test_the_schema_has_one_branch_per_kind_with_every_data_field_and_no_columns() -> None:
    schema = json_schema()
    branches = {b["properties"]["kind"]["const"]: b["properties"]["data"]
                for b in schema["oneOf"]}
    assert sorted(branches) == sorted(EVENT_TYPES)
    for kind, cls in EVENT_TYPES.items():
        fields = {f.name for f in dataclasses.fields(cls)} - {"turn_id", "session_id"}
        assert set(branches[kind]["properties"]) == fields, kind
        assert set(branches[kind]["required"]) == {
            f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING}, kind


def _entry(event: Event) -> dict[str, Any]:
    return {"kind": event.kind, "data": json.loads(json.dumps(event.data()))}


def test_an_independent_validator_accepts_every_sample_entry_against_the_schema() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    for cls in EVENT_TYPES.values():
        validator.validate(_entry(sample(cls)))


@pytest.mark.parametrize("change", [{"iteration": "3"}, {"escalated": 1}, {"surplus": 1}],
                         ids=["string for integer", "integer for boolean", "unknown key"])
def test_an_independent_validator_rejects_a_wrong_entry(change: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    entry = _entry(sample(InferenceRecorded))
    entry["data"].update(change)
    assert not validator.is_valid(entry)
    assert not validator.is_valid({"kind": "turn.annotated", "data": {}})

