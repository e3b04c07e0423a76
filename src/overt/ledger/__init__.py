"""The ledger: a hash-chained audit tier and a content tier, on SQLite or PostgreSQL."""

from __future__ import annotations

from overt.errors import UsageError
from overt.ledger.base import Entry, Ledger, TurnSummary, UsageRow, VerifyReport
from overt.ledger.sqlite import SqliteLedger


def open_ledger(url: str, *, read_only: bool = False, create: bool = True) -> Ledger:
    """Open the ledger named by ``url``.

    ``postgresql://…`` (or ``postgres://…``, optionally ``?schema=NAME``) is a
    PostgreSQL ledger (needs ``overt[postgres]``); ``sqlite:///PATH``, a file
    path or ``:memory:`` is a SQLite file. ``read_only``: write nothing, so a
    ledger this process may not write can be read; every write is refused.
    ``create=False``: open only a ledger that is there, so that one mistyped is an
    error, not a new empty ledger: no SQLite file, no PostgreSQL schema, or one
    holding no ledger, raises and nothing is made (a ledger at an older schema
    version is still migrated unless ``read_only``).

    Raises:
        UsageError: the URL names a backend overt does not have, or is a SQLite URI.
        ExtraMissingError: the backend's driver is not installed.
        LedgerError: the ledger cannot be opened; ``create`` false: it is not there.
    """
    refuse_sqlite_uri(url)
    path = sqlite_path(url)
    if path is not None:
        return SqliteLedger.open(path, read_only=read_only, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        from overt.ledger.postgres import PostgresLedger

        return PostgresLedger.open(url, read_only=read_only, create=create)
    raise UsageError(f"unsupported ledger URL {url!r}: a SQLite path or postgresql://…")


def sqlite_path(url: str) -> str | None:
    """The SQLite file ``url`` names for :func:`open_ledger` (a path, or
    ``:memory:``); ``None`` when it names another backend."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    return None if "://" in url else url


def refuse_sqlite_uri(url: str) -> None:
    """Refuse a SQLite URI (``file:ledger.db?mode=ro``): overt would take it for a
    path (a folder named ``file:``).

    Also a URL holding a NUL character, which no file name or server URL holds.

    Raises:
        UsageError: ``url`` is one; the message says what to give instead.
    """
    if "\0" in url:
        raise UsageError(f"ledger {url!r} holds a NUL character: name a file or a "
                         "postgresql://… URL")
    if url.removeprefix("sqlite:///").startswith("file:"):
        raise UsageError(f"{url!r} is a SQLite URI, not a ledger: give the file's path "
                         "(./file:NAME for a file so named), and --read-only to read it "
                         "without writing")


__all__ = ["Entry", "Ledger", "SqliteLedger", "TurnSummary", "UsageRow", "VerifyReport",
           "open_ledger", "refuse_sqlite_uri", "sqlite_path"]
