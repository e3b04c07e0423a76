"""Copying the journal's frames into SQLite (see :mod:`.journal`).

A :class:`Feeder` owns a SQLite connection of its own and a reader of the
journal. A thread wakes after each append and stores every frame waiting, all
in one transaction (a group commit); a reader of the ledger calls
:meth:`Feeder.catch_up` first, so it sees every record appended before it
asked, by any process. Storing a frame is idempotent: a frame whose entries
SQLite already holds (another process's feeder stored it, or it was stored
when it was written) is checked against the stored hash and skipped, so any
number of feeders may run.

A failure (a locked or full disk, a database that refuses a row) leaves the
frame in the journal and is kept: the ledger retries and raises it on its next
append if it persists, and nothing is lost.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from overt.errors import LedgerError
from overt.ledger import sql
from overt.ledger.canonical import GENESIS
from overt.ledger.journal import Head, Journal, JournalReader, Payload
from overt.ledger.schema.sqlite import lift_delete_guards, restore_delete_guards
from overt.ledger.sql import SQLITE as D
from overt.ledger.trail_index import index_rows

log = logging.getLogger("overt.ledger")

QUIET_S = 0.005
"""The feeder thread stores the journal once appends have paused this long. While
they keep coming it stays out of the way: storing rows from a thread while the
appending thread runs Python costs both of them Python's GIL, handed back and
forth around every row (the GIL's convoy effect: a busy process measured turns
180 µs slower with the thread storing beside them). Appends themselves store the
backlog when it passes :data:`LAG_BYTES`; a pause (a turn waiting on its model,
an idle assistant) lets the thread store the rest in the background. SQLite, as
read by anything but overt, trails the journal by that much; overt's own reads
catch up first."""

LAG_BYTES = 1 << 20
"""How far SQLite may trail the journal before an append stores the backlog
itself: under a steady stream of turns the thread never finds a pause (see
:data:`QUIET_S`), so the appender stores a megabyte (a few hundred turns) in one
transaction."""

ROTATE_BYTES = 8 << 20
"""The journal is replaced by an empty one once SQLite holds this much of it."""

Connect = Callable[[], sqlite3.Connection]


def store(conn: sqlite3.Connection, payload: Payload, held: int) -> int:
    """Store one frame inside the caller's transaction, SQLite holding entries to
    ``held``; returns the seq SQLite then holds to.

    Raises:
        LedgerError: the frame does not follow what SQLite holds (a gap, or a
            different entry under its seq).
        sqlite3.DatabaseError: SQLite refused a row.
    """
    base = payload.get("base")
    if base is not None:
        if int(base[0]) > held:
            raise LedgerError(f"the journal starts after entry {base[0]}, but the database "
                              f"holds entries only to {held}")
        return held
    entries = payload.get("entries") or []
    if not entries:
        raise LedgerError("a journal frame holds no entries")
    first, last = int(entries[0][0]), int(entries[-1][0])
    if last <= held:
        row = conn.execute("SELECT hash FROM audit_log WHERE seq = ?", (last,)).fetchone()
        if row is not None and row[0] != entries[-1][8]:
            raise LedgerError(f"the journal's entry {last} is not the database's entry {last}")
        return held
    if first != held + 1:
        raise LedgerError(f"the journal's next entry is {first}, but the database holds "
                          f"entries to {held}")
    contents = payload.get("contents")
    if contents:
        conn.executemany(sql.insert_content(D), contents)
    conn.executemany(sql.insert_entries(D), entries)
    indexed = index_rows(entries, contents)
    if indexed:
        conn.executemany(sql.INSERT_TRAIL_INDEX, indexed)
    for table, columns, values in payload.get("rows") or ():
        try:
            statement = sql.insert_row(D, table, columns)
        except ValueError as exc:
            raise LedgerError(f"the journal's entries {first}-{last}: {exc}") from exc
        conn.execute(statement, values)
    through = payload.get("prune")
    if through is not None:
        lift_delete_guards(conn)  # DDL in this transaction: a failure takes it back
        conn.execute(sql.delete_content_through(D), (through,))
        conn.execute(sql.DELETE_TRAIL_INDEX_THROUGH, (through,))
        conn.execute(sql.delete_entries_through(D), (through,))
        restore_delete_guards(conn)
    return last


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def head_in(conn: sqlite3.Connection) -> Head:
    """The chain head SQLite holds: (seq, hash) of its last entry, or (0, genesis)."""
    row = conn.execute(sql.HEAD).fetchone()
    return (int(row[0]), row[1]) if row else (0, GENESIS)


class Feeder:
    """Stores the journal's frames into SQLite, from a thread and on demand."""

    def __init__(self, connect: Connect, journal: Journal) -> None:
        self._conn = connect()
        self._journal = journal
        self._reader = journal.reader = JournalReader(journal.path)
        self._lock = threading.Lock()
        self._pending: list[Payload] = []
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.failure: LedgerError | None = None
        self.appended_at = 0.0  # time.monotonic() of the last append: set by the appender

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="overt-ledger-feeder",
                                        daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """An append was written: store it once appends pause."""
        self.appended_at = time.monotonic()
        if not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait()
            while not self._stopping:  # until appends pause
                time.sleep(QUIET_S)
                if time.monotonic() - self.appended_at >= QUIET_S:
                    break
            if self._stopping:
                return
            self._wake.clear()
            try:
                self.catch_up()
                if self._reader.offset >= ROTATE_BYTES:
                    self.rotate(blocking=False)
            except LedgerError as exc:
                log.error("overt.ledger_feed_failed %s", exc)

    def wait_idle(self) -> None:
        """Wait for a store in progress to finish. An appender calls this first, so
        the thread stores with the GIL to itself and the appender never runs
        beside it (see :data:`QUIET_S`)."""
        if self._lock.locked():
            with self._lock:
                pass

    def lagging(self) -> bool:
        """Whether SQLite trails this process's appends by more than :data:`LAG_BYTES`."""
        return self._journal.end - self._reader.offset > LAG_BYTES

    def behind(self) -> bool:
        """Whether the journal may hold frames SQLite does not (one ``fstat``)."""
        return bool(self._pending) or self._reader.unread()

    def catch_up(self) -> None:
        """Store every frame appended so far, by any process.

        Raises:
            LedgerError: they could not be stored; they stay in the journal, and
                :attr:`failure` holds the error until a later catch-up succeeds.
        """
        with self.storing():
            pass

    @contextmanager
    def storing(self) -> Iterator[tuple[sqlite3.Connection, int]]:
        """A write transaction on SQLite caught up with the journal, and the seq it
        holds to, for an append that must see the database first (claims, prunes,
        rows beside the chain). The caller stores its batch and writes its frame
        inside; an exception from it rolls the batch back.

        A commit that fails after the frame was written leaves the frame to be
        stored later (:attr:`failure` says so); the append itself stands.

        Raises:
            LedgerError: the journal could not be caught up with (see :meth:`catch_up`).
        """
        with self._lock, self._transaction() as started:
            yield started

    @contextmanager
    def _transaction(self) -> Iterator[tuple[sqlite3.Connection, int]]:
        conn = self._conn
        try:
            self._pending.extend(self._reader.read_new())
            conn.execute("BEGIN IMMEDIATE")
            try:
                held = head_in(conn)[0]
                for payload in self._pending:
                    held = store(conn, payload, held)
            except BaseException:
                _rollback(conn)
                raise
        except (LedgerError, sqlite3.DatabaseError) as exc:
            raise self._failed(exc) from exc
        try:
            yield conn, held
        except BaseException:
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            _rollback(conn)
            log.error("overt.ledger_feed_failed %s", self._failed(exc))
            return
        self._pending.clear()
        self.failure = None

    def _failed(self, exc: Exception) -> LedgerError:
        error = exc if isinstance(exc, LedgerError) else LedgerError(
            f"cannot store the journal into the database: {exc}")
        self.failure = error
        return error

    def rotate(self, *, blocking: bool) -> bool:
        """Start a new, empty journal if SQLite holds all of this one."""
        with self._lock:
            if self._pending:
                return False
            return self._journal.rotate_if(self._reader, blocking=blocking)

    def stop(self) -> None:
        """Stop the thread, store what is waiting and start an empty journal if
        SQLite then holds it all. A failure is logged: the frames stay in the
        journal for the next open."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.catch_up()
            self.rotate(blocking=False)
        except LedgerError as exc:
            log.error("overt.ledger_feed_failed %s (kept in the journal for the next open)", exc)
        finally:
            self._reader.close()
            self._conn.close()
