"""Typed events read back from the ledger: every event class round-trips through
both backends and comes back as the same typed value (``Entry.event``)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, get_args, get_origin

import pytest

from overt.errors import EventDecodeError, LedgerError
from overt.event_decode import from_entry
from overt.events import (
    EVENT_TYPES,
    AnyEvent,
    ChannelReplied,
    Event,
    HookBlocked,
    InferenceRecorded,
    ToolCallCompleted,
    TurnStarted,
)
from tests.conftest import run


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


def test_a_field_added_after_an_entry_was_written_takes_its_default() -> None:
    data = sample(InferenceRecorded).data()
    del data["adapter_decisions"]
    inference = from_entry(InferenceRecorded.kind, data, expect=InferenceRecorded)
    assert inference.adapter_decisions == [] and inference.model == "model-x"


def test_a_turn_start_that_names_no_sender_is_a_decode_error() -> None:
    data = sample(TurnStarted).data()
    del data["actor"]
    with pytest.raises(EventDecodeError, match=r"\['actor'\]"):
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
    with pytest.raises(EventDecodeError, match=r"\['tool_status'\]"):
        from_entry(ToolCallCompleted.kind, data)


def test_reading_an_entry_as_another_class_is_a_decode_error(ledger: Any) -> None:
    (entry,) = run(ledger.record([sample(ChannelReplied)]))
    with pytest.raises(EventDecodeError, match=r"channel\.replied entry is not a turn\.started"):
        entry.event(TurnStarted)
