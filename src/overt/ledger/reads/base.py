"""What the typed reads query: a ledger with plain reads of its tables, and its dialect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast, runtime_checkable

from overt.errors import UsageError
from overt.ledger.sql import POSTGRES, SQLITE, Dialect

BACKENDS = ("sqlite", "postgres")


@runtime_checkable
class Selecting(Protocol):
    """A ledger these reads can query: its backend's name and plain reads (both
    built-in ledgers are)."""

    backend: str

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...


_SELECTS: dict[type, bool] = {}
"""Whether each ledger class is :class:`Selecting` (an ``isinstance`` against a protocol
walks the class's attributes at every call, and every turn reads)."""


def _selects(ledger: object) -> bool:
    known = _SELECTS.get(type(ledger))
    if known is None:
        known = _SELECTS[type(ledger)] = isinstance(ledger, Selecting)
    return known


def readable(ledger: object) -> bool:
    """Whether the typed reads can query ``ledger`` (a SQLite or PostgreSQL ledger).

    A caller that has something else to do with a ledger that offers no reads of
    its tables (a fake, a third party's) asks this first; every read raises
    :class:`~overt.errors.UsageError` for such a ledger."""
    return _selects(ledger) and cast(Selecting, ledger).backend in BACKENDS


def selecting(ledger: object) -> tuple[Selecting, Dialect]:
    """``ledger`` as one these reads can query, and its dialect.

    Raises:
        UsageError: ``ledger`` is not a SQLite or PostgreSQL ledger.
    """
    if not readable(ledger):
        raise UsageError(f"{type(ledger).__name__} offers no reads of its tables (the "
                         "SQLite and PostgreSQL ledgers do)")
    reader = cast(Selecting, ledger)
    return reader, SQLITE if reader.backend == "sqlite" else POSTGRES
