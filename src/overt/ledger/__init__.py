"""The ledger: a hash-chained audit tier and a content tier, on SQLite (embedded default)."""

from __future__ import annotations

from overt.errors import UsageError
from overt.ledger.base import Entry, Ledger, TurnSummary, UsageRow, VerifyReport
from overt.ledger.sqlite import SqliteLedger


def open_ledger(url: str) -> Ledger:
    """Open the ledger named by ``url``: a SQLite file path, ``sqlite:///PATH`` or ``:memory:``.

    Raises:
        UsageError: the URL names a backend overt does not have.
        LedgerError: the ledger cannot be opened.
    """
    if url.startswith("sqlite:///"):
        return SqliteLedger.open(url.removeprefix("sqlite:///"))
    if "://" in url:
        raise UsageError(f"unsupported ledger URL {url!r}: give a SQLite file path")
    return SqliteLedger.open(url)


__all__ = ["Entry", "Ledger", "SqliteLedger", "TurnSummary", "UsageRow", "VerifyReport",
           "open_ledger"]
