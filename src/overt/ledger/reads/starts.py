"""The filters the turns and sessions tables put on a turn's ``turn.started`` entry
(alias ``s``): its channel, its actor, its session and its time. A turn's row is its
start (:mod:`overt.ledger.reads.turns`), a session's row its first turn's start
(:mod:`overt.ledger.reads.session_rows`, where the actor is the session's owner)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from overt.ledger.sql import Dialect


def start_filters(d: Dialect, *, source: str | None, actor: str | None,
                  sessions: Collection[str] | None,
                  since: str | None) -> tuple[str, list[Any]]:
    """The terms, each after an ``AND``, that keep the starts of ``source``, of
    ``actor``, of one of ``sessions`` (empty: none) and at or after ``since``, each
    when given; and their parameters, in order."""
    where = ""
    params: list[Any] = []
    if source is not None:
        where += f" AND {d.text('source', 's.data')} = {d.ph}"
        params.append(source)
    if actor is not None:
        where += f" AND {d.text('actor', 's.data')} = {d.ph}"
        params.append(actor)
    if sessions is not None:
        listed = sorted(sessions) or [""]
        where += f" AND s.session_id IN ({d.phs(len(listed))})"
        params.extend(listed)
    if since is not None:
        where += f" AND s.at >= {d.ph}"
        params.append(since)
    return where, params
