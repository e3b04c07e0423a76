"""The embedded ledger: one SQLite file in WAL mode, the same shape as PostgreSQL's.

:class:`SqliteLedger` is the :class:`~overt.ledger.sql_ledger.SqlLedger` on a
:class:`SqliteBackend`. A group's transaction is ``BEGIN IMMEDIATE`` (SQLite's
write lock, so processes sharing the file take turns); its rows are written by
``executemany``, the trail index's among them (PostgreSQL derives those itself).
A prune lifts the delete guards inside its own transaction
(:mod:`overt.ledger.schema.sqlite`).

Reads run on a small pool of threads, each with its own connection; WAL lets them
read while the writer writes, and each sees every record committed before it asked.

``synchronous=NORMAL``: a commit survives the process being killed at any
point; only a power loss can take the last ones. ``:memory:`` is a private
temporary file, removed on close (every thread must see the same database).
"""

from __future__ import annotations

import concurrent.futures
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from overt.clock import now_iso
from overt.errors import LedgerError, MigrationError
from overt.ledger import sql, trail_index
from overt.ledger.base import Entry
from overt.ledger.canonical import digest_text
from overt.ledger.groups import Head
from overt.ledger.schema import apply_pending, refuse_newer
from overt.ledger.schema.sqlite import (
    MIGRATIONS,
    MIGRATIONS_TABLE,
    lift_delete_guards,
    restore_delete_guards,
)
from overt.ledger.sql import SQLITE as D
from overt.ledger.sql_ledger import SqlLedger, Staged, head_of
from overt.ledger.sqlite_conn import connect, refuse_absent, split_sql, transaction

READERS = 4
T = TypeVar("T")

REFUSED_CODES = frozenset({1, 18, 19, 20, 25})
"""SQLite's primary result codes for a statement refused on what it writes: an SQL
error (a table that is not there), too big, a constraint (a guard's ``RAISE``), a
type mismatch, a parameter out of range. Not a lock, I/O, a full disk or corruption:
those fail the whole group."""


class SqliteLedger(SqlLedger):
    """A ledger in one SQLite file. Open with :meth:`open`; close with :meth:`close`."""

    path: str
    """The ledger's file (a temporary one for ``:memory:``)."""

    @classmethod
    def open(cls, path: str | Path, *, migrate: bool = True, read_only: bool = False,
             create: bool = True, clock: Callable[[], str] = now_iso) -> SqliteLedger:
        """Open (creating if needed) the ledger at ``path``, bring its schema up to
        date.

        ``read_only``: open it writing nothing at all (:mod:`.sqlite_conn`), so a
        ledger in a folder this process cannot write can be read; its schema must be
        up to date already, and every write is refused. ``create=False``: open only
        a ledger that is there (a file holding one, at any schema version); make
        nothing when it is not. ``clock``: the time entries are stamped with (a
        seeded ledger whose history lies in the past, as the eval suite writes).

        Raises:
            LedgerError: the file cannot be opened or is not a SQLite database;
                read only: there is no file, or its schema is not up to date;
                ``create`` false: there is no file, or it holds no ledger
                (``:memory:`` never does).
            MigrationError: the schema could not be migrated.
        """
        p, temporary = str(path), None
        if p == ":memory:":
            if read_only:
                raise LedgerError("a :memory: ledger cannot be opened read-only")
            if not create:
                raise LedgerError("no ledger at :memory:: each open makes a new, empty one")
            temporary = tempfile.mkdtemp(prefix="overt-ledger-")
            p = str(Path(temporary) / "ledger.db")
        elif not create:
            refuse_absent(p)  # before the connection below makes the file
        db = SqliteBackend(p, temporary, read_only=read_only)
        try:
            conn = connect(p, read_only=read_only)
            try:
                if read_only:
                    _refuse_stale(conn, p)
                elif migrate:
                    _migrate(conn, p)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            db.close()
            raise
        if read_only:
            conn.close()
        ledger = cls(db, conn=None if read_only else conn, clock=clock)
        ledger.path = p
        return ledger


class SqliteBackend:
    """SQLite's part of a :class:`~overt.ledger.sql_ledger.SqlLedger`
    (:class:`~overt.ledger.sql_ledger.Backend`)."""

    name = "sqlite"
    dialect = D
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, path: str, temporary: str | None, *, read_only: bool) -> None:
        self.path = self.url = path
        self.where = f"ledger {path}"
        self.read_only = read_only
        self.executor = concurrent.futures.ThreadPoolExecutor(
            READERS, thread_name_prefix="overt-ledger-reader")
        self._temporary = temporary
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()

    # -- reading --------------------------------------------------------------

    def _reader_conn(self) -> sqlite3.Connection:
        """This reader thread's connection, opened on its first read."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self.path, read_only=self.read_only)
            with self._conns_lock:
                self._reader_conns.append(conn)
        return conn

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return work(self._reader_conn())
        except sqlite3.DatabaseError as exc:
            raise self.error("read", exc) from exc

    @contextmanager
    def snapshot(self, conn: sqlite3.Connection, *, text: bool = False
                 ) -> Iterator[sqlite3.Connection]:
        """A read transaction (WAL: one snapshot until it ends)."""
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def stream(self, conn: sqlite3.Connection, statement: str) -> Iterator[Any]:
        return conn.execute(statement)

    def body_digest(self, body: Any) -> str:
        return digest_text(body) if isinstance(body, str) else ""  # a BLOB: by hand

    def index_rows(self, entries: Sequence[Entry],
                   body_seqs: dict[str, int]) -> list[tuple[str, list[Any]]]:
        return trail_index.inserts(entries, body_seqs, D.ph)

    # -- writing --------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        return connect(self.path)

    def begin(self, conn: sqlite3.Connection) -> Head:
        conn.execute("BEGIN IMMEDIATE")
        return head_of(conn.execute(sql.HEAD).fetchone())

    def write(self, conn: sqlite3.Connection, staged: Staged) -> None:
        if staged.bodies:
            conn.executemany(sql.insert_content(D), _keyed(staged.bodies, staged.at))
        conn.executemany(sql.insert_entries(D), staged.entries)
        for statement, rows in staged.index:
            conn.executemany(statement, rows)
        for statement, values in staged.inserts:
            conn.execute(statement, values)

    def commit(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("COMMIT")

    def rollback(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def delete_through(self, conn: sqlite3.Connection, through: int) -> None:
        lift_delete_guards(conn)  # DDL in this transaction: a failure takes it back
        conn.execute(sql.delete_content_through(D), (through,))
        conn.execute(sql.delete_trail_index_through(D), (through,))
        conn.execute(sql.delete_entries_through(D), (through,))
        restore_delete_guards(conn)

    def refused(self, exc: Exception) -> bool:
        if isinstance(exc, (sqlite3.ProgrammingError, sqlite3.InterfaceError)):
            return True  # a value the driver cannot bind
        code = getattr(exc, "sqlite_errorcode", None)
        return isinstance(exc, sqlite3.Error) and code is not None \
            and code & 0xFF in REFUSED_CODES

    def stale(self, exc: Exception) -> bool:
        return False

    def error(self, verb: str, exc: Exception) -> LedgerError:
        return LedgerError(f"cannot {verb} {self.where}: {exc}")

    # -- the schema, and closing ----------------------------------------------

    def migrate(self) -> list[int]:
        conn = connect(self.path)
        try:
            return _migrate(conn, self.path)
        finally:
            conn.close()

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        with self._conns_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)


def _migrate(conn: sqlite3.Connection, path: str) -> list[int]:
    """Apply pending migrations on ``conn``; the versions applied. Safe when several
    processes start at once: each migration is applied under the write lock, after
    re-reading what is already applied.

    Raises:
        MigrationError: a migration failed; nothing of it was applied.
    """
    def run(script: str) -> None:
        for statement in split_sql(script):
            conn.execute(statement)

    try:
        conn.executescript(MIGRATIONS_TABLE)
        refuse_newer((r[0] for r in conn.execute("SELECT version FROM overt_migrations")), path)
        return apply_pending(conn, MIGRATIONS, ph=D.ph,
                             transaction=lambda: transaction(conn), run=run)
    except MigrationError:
        raise
    except (sqlite3.DatabaseError, LedgerError) as exc:
        raise MigrationError(f"cannot migrate ledger {path}: {exc}") from exc


def _refuse_stale(conn: sqlite3.Connection, path: str) -> None:
    """Refuse to read, read-only, a ledger that opening it writable would change first:
    a migration not applied.

    Raises:
        LedgerError: which, and what to do.
    """
    known = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'overt_migrations'"
                         ).fetchone()
    applied = {r[0] for r in conn.execute("SELECT version FROM overt_migrations")} \
        if known else set()
    refuse_newer(applied, path)
    missing = [version for version, _, _ in MIGRATIONS if version not in applied]
    if missing:
        raise LedgerError(f"cannot read ledger {path} read-only: its schema lacks "
                          f"migration {missing[0]}; open it once "
                          "writable (overt ledger migrate) by a process that may write it")


def _keyed(rows: list[tuple[int, str, str]], at: str) -> list[tuple[int, int, str, str, str]]:
    """Content rows (seq, digest, body) as inserted, in key order: ``seq << 20 | n``
    (see :data:`~overt.ledger.sql.CONTENT_KEY_SHIFT`).

    Raises:
        LedgerError: more bodies under one seq than a key holds (over a million).
    """
    rows.sort(key=lambda r: r[0])
    out: list[tuple[int, int, str, str, str]] = []
    previous, n = -1, 0
    for seq, digest, body in rows:
        n = n + 1 if seq == previous else 0
        if n > sql.CONTENT_KEY_MASK:
            raise LedgerError(f"more than {sql.CONTENT_KEY_MASK + 1} bodies under one entry")
        previous = seq
        out.append(((seq << sql.CONTENT_KEY_SHIFT) | n, seq, digest, body, at))
    return out
