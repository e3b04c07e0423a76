"""The typed event an audit entry recorded: an entry's ``kind`` and ``data`` back
into its :mod:`overt.events` class, for every reader of the ledger.

Entries outlive the code that wrote them, so decoding is lenient where it can
be and strict where it must be: a field the class gained since takes its
default, a key written by a later version is left out, and a missing required
field or an unknown kind is an :class:`~overt.errors.EventDecodeError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from overt.errors import EventDecodeError
from overt.events import EVENT_TYPES, AnyEvent, Event

E = TypeVar("E", bound=Event)
_SHAPES: dict[type[Event], tuple[tuple[str, ...], frozenset[str]]] = {}


def _shape(cls: type[Event]) -> tuple[tuple[str, ...], frozenset[str]]:
    """An event class's data fields, and those of them without a default."""
    shape = _SHAPES.get(cls)
    if shape is None:
        fields = [f for f in dataclasses.fields(cls) if f.name not in ("turn_id", "session_id")]
        shape = (tuple(f.name for f in fields), frozenset(
            f.name for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING))
        _SHAPES[cls] = shape
    return shape


@overload
def from_entry(kind: str, data: Mapping[str, Any], *, turn_id: str | None = ...,
               session_id: str | None = ..., expect: None = ...) -> AnyEvent: ...


@overload
def from_entry(kind: str, data: Mapping[str, Any], *, turn_id: str | None = ...,
               session_id: str | None = ..., expect: type[E]) -> E: ...


def from_entry(kind: str, data: Mapping[str, Any], *, turn_id: str | None = None,
               session_id: str | None = None, expect: type[Event] | None = None) -> Event:
    """The typed event an entry of ``kind`` with ``data`` recorded.

    A field the class gained after the entry was written takes its default; a
    key of ``data`` the class does not have (written by a later version) is left
    out. ``expect``: the class the caller reads, checked against ``kind``.

    Raises:
        EventDecodeError: no event class has ``kind``, ``kind`` is not
            ``expect``'s, or ``data`` lacks a field the class requires.
    """
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise EventDecodeError(f"no event class records kind {kind!r}", kind=kind)
    if expect is not None and cls is not expect:
        raise EventDecodeError(f"a {kind} entry is not a {expect.kind} event", kind=kind)
    names, required = _shape(cls)
    missing = required.difference(data)
    if missing:
        raise EventDecodeError(f"a {kind} entry lacks the field(s) {sorted(missing)} its "
                               f"event class {cls.__name__} requires", kind=kind)
    return cls(turn_id=turn_id, session_id=session_id,
               **{name: data[name] for name in names if name in data})
