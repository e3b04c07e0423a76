"""The optional filters of the typed reads: terms kept when their value is given, and
the filters the turns and sessions tables put on a turn's ``turn.started`` entry
(alias ``s``). A turn's row is its start (:mod:`overt.ledger.reads.turns`), a
session's row its first turn's start (:mod:`overt.ledger.reads.session_rows`, where
the actor is the session's owner)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from overt.ledger.sql import Dialect


def given(*terms: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """Of ``(term, value)`` pairs, each term holding one placeholder, the terms whose
    value is given (not ``None``), and those values as their parameters, in order."""
    kept = [(term, value) for term, value in terms if value is not None]
    return [term for term, _ in kept], [value for _, value in kept]


def start_filters(d: Dialect, *, source: str | None, actor: str | None,
                  sessions: Collection[str] | None,
                  since: str | None) -> tuple[str, list[Any]]:
    """The terms, each after an ``AND``, that keep the starts of ``source``, of
    ``actor``, at or after ``since`` and of one of ``sessions`` (empty: none), each
    when given; and their parameters, in order."""
    terms, params = given((f"{d.text('source', 's.data')} = {d.ph}", source),
                          (f"{d.text('actor', 's.data')} = {d.ph}", actor),
                          (f"s.at >= {d.ph}", since))
    if sessions is not None:
        listed = sorted(sessions) or [""]
        terms.append(f"s.session_id IN ({d.phs(len(listed))})")
        params.extend(listed)
    return "".join(f" AND {term}" for term in terms), params
