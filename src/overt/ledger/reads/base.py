"""What the typed reads query: a ledger with plain reads of its tables, and its dialect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from overt.errors import UsageError
from overt.ledger.sql import POSTGRES, SQLITE, Dialect

BACKENDS = ("sqlite", "postgres")


@runtime_checkable
class Selecting(Protocol):
    """A ledger these reads can query: its backend's name and plain reads (both
    built-in ledgers are)."""

    backend: str

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...


def readable(ledger: object) -> bool:
    """Whether the typed reads can query ``ledger`` (a SQLite or PostgreSQL ledger).

    A caller that has something else to do with a ledger that offers no reads of
    its tables (a fake, a third party's) asks this first; every read raises
    :class:`~overt.errors.UsageError` for such a ledger."""
    return isinstance(ledger, Selecting) and ledger.backend in BACKENDS


def selecting(ledger: object) -> tuple[Selecting, Dialect]:
    """``ledger`` as one these reads can query, and its dialect.

    Raises:
        UsageError: ``ledger`` is not a SQLite or PostgreSQL ledger.
    """
    if not isinstance(ledger, Selecting) or ledger.backend not in BACKENDS:
        raise UsageError(f"{type(ledger).__name__} offers no reads of its tables (the "
                         "SQLite and PostgreSQL ledgers do)")
    return ledger, SQLITE if ledger.backend == "sqlite" else POSTGRES
