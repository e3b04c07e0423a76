"""Connections to a SQLite ledger: writable (WAL, the ledger's settings) or read-only.

A read-only connection writes nothing, not even SQLite's ``-shm`` and ``-wal``
files, so it reads a ledger in a folder this process cannot write (another user's,
a read-only mount, an archive). SQLite reads a WAL database read-only when its
``-wal`` and ``-shm`` files are there (a process has it open, it may be writing:
the reader sees every commit, as any reader does); when they are not, no process
has the file open, everything is in the file itself, and it is read as
``immutable``: without locks, since it cannot take them. A writer that opens it
while such a read runs may change pages under it; read again then.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from overt.errors import LedgerError
from overt.ledger.schema.sqlite import refuse_foreign

BUSY_TIMEOUT_MS = 30_000
CACHE_KIB = 32 * 1024  # the default 2 MiB cache re-reads index pages from disk on every turn


def connect(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection with the ledger's settings, once the file is known to be overt's
    (:func:`~overt.ledger.schema.sqlite.refuse_foreign`).

    Raises:
        LedgerError: the file cannot be opened or is not a SQLite database, or not overt's.
    """
    if read_only:
        return _connect_read_only(path)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        refuse_foreign(conn, path)  # before WAL mode, which rewrites the header
        _wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA cache_size = {-CACHE_KIB}")
    except (sqlite3.DatabaseError, OSError) as exc:  # OSError: its folder cannot be made
        hint = "" if writable(path) else (
            " (this process cannot write the file or its folder: commands that only read "
            "open it read-only, as --read-only does)")
        raise LedgerError(f"cannot open ledger {path}: {exc}{hint}") from exc
    return conn


def refuse_absent(path: str) -> None:
    """Refuse, making and writing nothing, a ledger that is not there: no file at
    ``path``, or a file that holds no overt ledger (an empty one, made by hand or by
    another program). For a caller that opens only a ledger that exists.

    Raises:
        LedgerError: which, naming the path.
    """
    if not Path(path).is_file():
        what = "a folder, not a file" if Path(path).is_dir() else "no such file"
        raise LedgerError(f"no ledger at {path}: {what} (opened only if it is "
                          "there: nothing was made)")
    conn = _connect_read_only(path)
    try:
        known = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                             "AND name = 'overt_migrations'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot open ledger {path}: {exc}") from exc
    finally:
        conn.close()
    if known is None:
        raise LedgerError(f"no ledger at {path}: the file holds no overt ledger (opened "
                          "only if it is there: nothing was written)")


def writable(path: str) -> bool:
    """Whether this process may write the ledger file at ``path`` and the files SQLite
    keeps beside it (its folder); for a file not there yet, whether it may create it."""
    p = Path(path).absolute()
    folder = p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # a folder still to be made: made in the first that exists
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return False
    return not p.exists() or os.access(p, os.R_OK | os.W_OK)


def _connect_read_only(path: str) -> sqlite3.Connection:
    """A connection that writes nothing (see the module's docstring).

    Raises:
        LedgerError: there is no file at ``path``, or it cannot be read.
    """
    p = Path(path)
    if not p.is_file():
        raise LedgerError(f"cannot open ledger {path}: no such file (opened read-only: "
                          "nothing is made)")
    uri = p.resolve().as_uri() + "?mode=ro"
    try:
        try:
            conn = _open_uri(uri)
        except sqlite3.OperationalError:
            if Path(f"{path}-wal").exists():
                raise  # a process has it open: its -shm must be readable
            conn = _open_uri(uri + "&immutable=1")
        refuse_foreign(conn, path)
        conn.execute(f"PRAGMA cache_size = {-CACHE_KIB}")
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot open ledger {path} (read-only): {exc}") from exc
    return conn


def _open_uri(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens -wal, -shm
    except BaseException:
        conn.close()
        raise
    return conn


def _wal(conn: sqlite3.Connection) -> None:
    """Put the database in WAL mode. Processes opening a new file at once contend
    for the exclusive lock the switch takes, and SQLite answers that contention
    with "database is locked" without waiting on the busy timeout: try again
    until the timeout.

    Raises:
        sqlite3.OperationalError: still locked after :data:`BUSY_TIMEOUT_MS`.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


class transaction:  # lower case: it reads as a statement, with transaction(conn)
    """A write transaction holding SQLite's write lock (``BEGIN IMMEDIATE``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self._conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")


def split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping ``CREATE TRIGGER ... END;`` whole."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
