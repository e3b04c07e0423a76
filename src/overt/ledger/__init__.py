"""The ledger: a hash-chained audit tier and a content tier, on SQLite or PostgreSQL."""

from __future__ import annotations

from overt.errors import UsageError
from overt.ledger.base import Entry, Ledger, TurnSummary, UsageRow, VerifyReport
from overt.ledger.sqlite import SqliteLedger


def open_ledger(url: str) -> Ledger:
    """Open the ledger named by ``url``.

    ``postgresql://…`` (or ``postgres://…``, optionally ``?schema=NAME``) is a
    PostgreSQL ledger (needs ``overt[postgres]``); ``sqlite:///PATH``, a file
    path or ``:memory:`` is a SQLite file.

    Raises:
        UsageError: the URL names a backend overt does not have.
        ExtraMissingError: the backend's driver is not installed.
        LedgerError: the ledger cannot be opened.
    """
    if url.startswith(("postgresql://", "postgres://")):
        from overt.ledger.postgres import PostgresLedger

        return PostgresLedger.open(url)
    if url.startswith("sqlite:///"):
        return SqliteLedger.open(url.removeprefix("sqlite:///"))
    if "://" in url:
        raise UsageError(f"unsupported ledger URL {url!r}: a SQLite path or postgresql://…")
    return SqliteLedger.open(url)


__all__ = ["Entry", "Ledger", "SqliteLedger", "TurnSummary", "UsageRow", "VerifyReport",
           "open_ledger"]
