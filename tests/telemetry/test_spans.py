"""The span builder reads hook entries by field name: the names must stay fields."""

from __future__ import annotations

import dataclasses

from overt.events import EVENT_TYPES
from overt.telemetry.spans import _HOOK_ATTRIBUTES, HOOK_PREFIX


def test_every_hook_attribute_the_spans_copy_is_a_field_of_a_hook_event() -> None:
    fields = {f.name for kind, cls in EVENT_TYPES.items() if kind.startswith(HOOK_PREFIX)
              for f in dataclasses.fields(cls)}
    assert set(_HOOK_ATTRIBUTES) <= fields
