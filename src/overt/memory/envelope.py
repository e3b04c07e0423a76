"""What a memory tool answers: ``{"ok": true, ...}`` or ``{"ok": false, "error": {...}}``.

Invalid input is the model's to fix, so it comes back as data with a code the
model can act on (read the current revision, pick another kind), never as an
exception that ends in a bare error string.
"""

from __future__ import annotations

from typing import Any, Literal

Envelope = dict[str, Any]

ErrorCode = Literal[
    "missing_field",        # a required argument is absent or empty
    "invalid_argument",     # a value out of range or not one of the choices
    "too_long",             # a title or body past its limit
    "unknown_kind",         # a node kind the memory does not know
    "unknown_link_kind",    # a link kind the memory does not know
    "link_not_allowed",     # the link kind may not join these two node kinds
    "not_found",            # no node or link with that id (a dangling id)
    "superseded",           # the revision named is not the current one
    "already_retracted",    # the link was retracted before
    "capability_missing",   # the actor may not do this
]


def ok(**fields: Any) -> Envelope:
    """A successful answer carrying ``fields``."""
    return {"ok": True, **fields}


def error(code: ErrorCode, message: str, **details: Any) -> Envelope:
    """A refusal the model can act on: ``code``, a sentence saying what to do, and
    any ``details`` (the current id, the kinds allowed)."""
    return {"ok": False, "error": {"code": code, "message": message, **details}}
