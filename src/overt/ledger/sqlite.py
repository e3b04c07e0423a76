"""The embedded ledger: one SQLite file in WAL mode, with a journal in front of it.

A record is committed to the journal (:mod:`.journal`): one ``os.write`` of the
chained batch, under an exclusive ``flock`` that every appending process takes,
so several processes can share a ledger and the chain stays one sequence. A
feeder (:mod:`.feeder`) copies the journal into SQLite from a thread, many
batches a transaction, and every read catches SQLite up first, so a reader
sees every record appended before it asked. An append that must see the
database (a once-only claim, rows beside the chain, a prune) takes the journal,
catches SQLite up, checks and stores its batch in one SQLite transaction and
writes its frame before committing it.

A record is as durable in the journal as in SQLite's WAL under
``synchronous=NORMAL``: it survives the process being killed at any point; only
a power loss can take the last ones. A ledger opened after a crash stores what
the journal holds before anything else.

``:memory:`` ledgers (and :meth:`SqliteLedger.open` with ``journal=False``)
write each batch to SQLite directly under its write lock (``BEGIN IMMEDIATE``),
caching the head and re-reading it when another writer moved it.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from overt.clock import now_iso
from overt.errors import LedgerConflict, LedgerError, MigrationError
from overt.events import Event, LedgerPruned
from overt.ledger import retention, sql, trail_index, tree
from overt.ledger.base import (
    Entry,
    TableRow,
    TrailRow,
    TurnSummary,
    UsageRow,
    VerifyReport,
)
from overt.ledger.canonical import digest_text
from overt.ledger.chain import (
    Draft,
    batch_claims,
    chain,
    content_rows,
    drafts,
    row_to_entry,
    turn_started_before,
    verify_payloads,
    verify_rows,
    with_body_check,
    with_content_check,
)
from overt.ledger.feeder import Feeder, head_in, store
from overt.ledger.journal import Head, Journal, Payload, encode, head_of, journal_path
from overt.ledger.notify import AppendSignal
from overt.ledger.schema.sqlite import FILLS, MIGRATIONS, MIGRATIONS_TABLE
from overt.ledger.sql import SQLITE as D

BUSY_TIMEOUT_MS = 30_000
CACHE_KIB = 32 * 1024  # the default 2 MiB cache re-reads index pages from disk on every turn
T = TypeVar("T")


class SqliteLedger:
    """A ledger in one SQLite file. Open with :meth:`open`."""

    backend = "sqlite"

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._head: Head | None = None
        self._closed = False
        self._journal: Journal | None = None
        self._feeder: Feeder | None = None
        self._journaled = False
        self.appended = AppendSignal()
        """Signalled after each append of this process (readers that follow the ledger)."""
        self.path = path
        self.url = path

    @classmethod
    def open(cls, path: str | Path, *, migrate: bool = True,
             journal: bool = True) -> SqliteLedger:
        """Open (creating if needed) the ledger at ``path``, bring its schema up to
        date and store what its journal holds. ``journal=False`` writes each batch
        to SQLite directly (slower; for comparison and for tools that read the
        database while overt writes it); a journal left by an earlier process is
        still stored first.

        Raises:
            LedgerError: the file cannot be opened or is not a SQLite database, or
                its journal is corrupt or does not follow it.
            MigrationError: the schema could not be migrated.
        """
        p = str(path)
        if p != ":memory:":
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        ledger = cls(_connect(p), p)
        ledger._journaled = journal and p != ":memory:"
        try:
            if migrate:
                ledger.migrate()
            elif ledger._query("SELECT 1 FROM sqlite_master WHERE name = 'audit_log'"):
                ledger._start_journal()
        except BaseException:
            ledger.close_sync()
            raise
        return ledger

    def _start_journal(self) -> None:
        """Open the journal, store what it holds (a crashed process's last batches)
        and start the feeder; without :attr:`_journaled`, stop using it once stored.

        A database holding more than the journal knows (written without one, as
        ``journal=False`` does) starts the journal again from its head.
        """
        if self._journal is not None or self.path == ":memory:" or not (
                self._journaled or Path(journal_path(self.path)).exists()):
            return
        with self._lock:
            stored = head_in(self._conn)
        journal = self._journal = Journal.open(journal_path(self.path), stored)
        feeder = self._feeder = Feeder(lambda: _connect(self.path), journal)
        with journal.appending() as head, feeder.storing() as (conn, held):
            if held > head[0]:
                journal.rebase(head_in(conn))
        if self._journaled:
            feeder.start()
            return
        feeder.stop()
        journal.close()
        self._journal = self._feeder = None

    # -- schema -------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied (empty: up to date).

        Safe when several processes start at once: each migration is applied
        under the write lock, after re-reading what is already applied.

        Raises:
            MigrationError: a migration failed; nothing of it was applied.
        """
        applied: list[int] = []
        with self._lock:
            try:
                self._conn.executescript(MIGRATIONS_TABLE)
                for version, name, script in MIGRATIONS:
                    with self._write():
                        if self._conn.execute("SELECT 1 FROM overt_migrations WHERE version = ?",
                                              (version,)).fetchone():
                            continue
                        for statement in _split_sql(script):
                            self._conn.execute(statement)
                        fill = FILLS.get(version)
                        if fill is not None:
                            fill(self._conn)
                        self._conn.execute("INSERT INTO overt_migrations VALUES (?, ?, ?)",
                                           (version, name, now_iso()))
                        applied.append(version)
            except (sqlite3.DatabaseError, LedgerError) as exc:
                raise MigrationError(f"cannot migrate ledger {self.path}: {exc}") from exc
        self._start_journal()
        return applied

    def schema_versions(self) -> list[int]:
        return [r[0] for r in self._query("SELECT version FROM overt_migrations ORDER BY 1")]

    @contextmanager
    def _write(self) -> Iterator[None]:
        """A write transaction holding SQLite's write lock; the caller holds ``_lock``."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- writing ------------------------------------------------------------

    async def record(self, events: Sequence[Event],
                     contents: Mapping[str, str] | None = None, *,
                     rows: Sequence[TableRow] = ()) -> list[Entry]:
        return self.record_sync(events, contents, rows=rows)

    def record_sync(self, events: Sequence[Event],
                    contents: Mapping[str, str] | None = None, *,
                    rows: Sequence[TableRow] = ()) -> list[Entry]:
        """:meth:`record`, for callers without an event loop."""
        try:
            batch = drafts(events)
            table_rows = [(table, list(values), list(values.values())) for table, values in rows]
            for table, columns, _ in table_rows:
                sql.insert_row(D, table, columns)  # refuses a name that is not plain
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"event data is not canonical JSON: {exc}") from exc
        at = now_iso()

        def work(conn: sqlite3.Connection, head: Head) -> tuple[Payload | None, list[Entry]]:
            return self._batch(conn, head, at, batch, contents, table_rows)

        if self._journal is None:
            entries = self._locked_write(work)
        elif not batch and not table_rows:
            return []
        elif table_rows or batch_claims(batch):
            entries = self._journaled_write(work)
        else:
            entries = self._journaled_append(at, batch, contents)
        if entries:
            self.appended.notify(entries[-1].seq, {e.turn_id for e in entries})
        return entries

    def _journaled_append(self, at: str, batch: list[Draft],
                          contents: Mapping[str, str] | None) -> list[Entry]:
        """The common append: chained and written to the journal, SQLite fed later."""
        assert self._journal is not None and self._feeder is not None
        if self._feeder.failure is not None:
            self._feeder.catch_up()  # raises if storing still fails: nothing more is written
        self._feeder.wait_idle()
        with self._journal.appending() as head:
            payload, entries = _frame(head, at, batch, contents)
            self._journal.write(encode(payload), head_of(payload, head), payload)
        if self._feeder.lagging():
            self._feeder.catch_up()
        else:
            self._feeder.wake()
        return entries

    def _journaled_write(self, work: Callable[[sqlite3.Connection, Head],
                                              tuple[Payload | None, T]]) -> T:
        """An append that must see the database: under the journal's lock, on SQLite
        caught up, ``work`` stores its batch and returns its frame, written before
        the commit."""
        assert self._journal is not None and self._feeder is not None
        try:
            with self._journal.appending() as head, self._feeder.storing() as (conn, held):
                if held != head[0]:
                    raise LedgerError(f"ledger {self.path}: the journal's head is entry "
                                      f"{head[0]} but the database holds entries to {held}")
                payload, result = work(conn, head)
                if payload is not None:
                    self._journal.write(encode(payload), head_of(payload, head), payload)
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"cannot write ledger {self.path}: {exc}") from exc
        return result

    def _locked_write(self, work: Callable[[sqlite3.Connection, Head],
                                           tuple[Payload | None, T]]) -> T:
        """An append straight to SQLite (no journal)."""
        with self._lock:
            if self._closed:
                raise LedgerError(f"ledger {self.path} is closed")
            for attempt in (1, 2, 3):
                try:
                    with self._write():
                        if self._head is None:
                            self._head = head_in(self._conn)
                        payload, result = work(self._conn, self._head)
                        if payload is not None:
                            self._head = head_of(payload, self._head)
                        return result
                except sqlite3.IntegrityError as exc:
                    # Another writer moved the head since we cached it: re-read, retry.
                    self._head = None
                    if attempt == 3:
                        raise LedgerError(f"cannot append to ledger {self.path}: {exc}") from exc
                except sqlite3.DatabaseError as exc:
                    self._head = None
                    raise LedgerError(f"cannot write ledger {self.path}: {exc}") from exc
        raise AssertionError("unreachable")

    @staticmethod
    def _batch(conn: sqlite3.Connection, head: Head, at: str, batch: list[Draft],
               contents: Mapping[str, str] | None,
               table_rows: list[tuple[str, list[str], list[Any]]],
               ) -> tuple[Payload | None, list[Entry]]:
        """Inside a write transaction: claims checked, the batch chained onto
        ``head`` and stored (content, entries, then the rows beside the chain)."""
        for kind, claim in batch_claims(batch):
            if conn.execute(sql.claim_exists(D), (kind, claim)).fetchone():
                raise LedgerConflict(kind, claim)
        if not batch:  # rows alone: nothing to chain, nothing to journal
            for table, columns, values in table_rows:
                conn.execute(sql.insert_row(D, table, columns), values)
            return None, []
        payload, entries = _frame(head, at, batch, contents)
        if table_rows:
            payload["rows"] = table_rows
        store(conn, payload, head[0])
        return payload, entries
    async def claimed(self, kind: str, claim: str) -> Entry | None:
        rows = self._query(sql.claim_exists(D), (kind, claim))
        return row_to_entry(rows[0]) if rows else None

    async def prune(self, cutoff: str) -> LedgerPruned:
        """Remove entries and content older than ``cutoff`` (see :mod:`.retention`)."""
        return self.prune_sync(cutoff)

    def prune_sync(self, cutoff: str) -> LedgerPruned:
        def work(conn: sqlite3.Connection, head: Head) -> tuple[Payload | None, LedgerPruned]:
            record = retention.plan(lambda q, p: conn.execute(q, p).fetchone(), D, cutoff,
                                    head[0])
            payload, _ = _frame(head, now_iso(), drafts([record]), None)
            if record.removed_entries:
                payload["prune"] = record.through_seq
                payload["rows"] = [(table, list(values), list(values.values())) for table, values
                                   in tree.prune_rows(lambda q, p: conn.execute(q, p).fetchall(),
                                                      D, record.through_seq)]
            store(conn, payload, head[0])
            return payload, record

        if self._journal is None:
            self._head = None  # the chain is read again: a prune starts from what is stored
            return self._locked_write(work)
        return self._journaled_write(work)

    # -- reading ------------------------------------------------------------

    def sync(self) -> None:
        """Store every record the journal holds into SQLite now. Every read of overt's
        does this first, so it sees every record appended before it, by any
        process; a program reading the database file itself (``sqlite3``, the
        ``reasoning_steps`` view) calls it.

        Raises:
            LedgerError: the journal could not be stored.
        """
        if self._feeder is not None and self._feeder.behind():
            self._feeder.catch_up()

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        self.sync()
        with self._lock:
            try:
                return self._conn.execute(statement, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"cannot read ledger {self.path}: {exc}") from exc

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of a query on the tables beside the chain (memory reads them so)."""
        return self._query(statement, params)

    async def entries(self, *, turn_id: str | None = None, session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None, limit: int | None = None) -> list[Entry]:
        statement, params = sql.select_entries(D, turn_id=turn_id, session_id=session_id,
                                               kinds=kinds, since=since, until=until,
                                               limit=limit)
        return [row_to_entry(r) for r in self._query(statement, params)]

    async def trail_rows(self, *, turn_id: str | None = None,
                         session_id: str | None = None, since: str | None = None,
                         until: str | None = None) -> list[TrailRow]:
        statement, params = sql.trail_indexed(turn_id=turn_id, session_id=session_id,
                                              since=since, until=until)
        return self._query(statement, params)

    async def content(self, digest: str, *, seq: int | None = None) -> str | None:
        if seq is None:
            rows = self._query(sql.select_content(D, near_seq=False), (digest,))
        else:
            rows = self._query(sql.select_content(D, near_seq=True), (seq, digest))
        return rows[0][0] if rows else None

    async def recent_turns(self, limit: int = 20) -> list[TurnSummary]:
        return [
            TurnSummary(r[0], r[1], r[2], r[3], r[4], r[5],
                        json.loads(r[6]) if r[6] is not None else None, r[7])
            for r in self._query(sql.recent_turns(D), (int(limit),))
        ]

    async def usage(self, since: str | None = None, until: str | None = None,
                    by: Sequence[str] = ("route", "model")) -> list[UsageRow]:
        rows = self._query(sql.usage(D, by), (since or "", until or "\uffff"))
        return [UsageRow(r[0], r[1], int(r[4]), int(r[5]), int(r[6]), round(float(r[7]), 10),
                         r[2], r[3]) for r in rows]

    async def spent(self, *, since: str, session_id: str | None = None) -> tuple[int, float]:
        params = (since,) if session_id is None else (since, session_id)
        row = self._query(sql.spent(D, session=session_id is not None), params)[0]
        return int(row[0]), round(float(row[1]), 10)

    async def count(self, kind: str, since: str | None = None) -> int:
        return int(self._query(sql.count(D, kind), (kind, since or ""))[0][0])

    async def last_error(self) -> Entry | None:
        rows = self._query(sql.last_error(D))
        return row_to_entry(rows[0]) if rows else None

    # -- verification -------------------------------------------------------

    async def verify(self, *, check_content: bool = True, check_index: bool = True,
                     check_bodies: bool = True) -> VerifyReport:
        return self.verify_sync(check_content=check_content, check_index=check_index,
                                check_bodies=check_bodies)

    def verify_sync(self, *, check_content: bool = True, check_index: bool = True,
                    check_bodies: bool = True) -> VerifyReport:
        """:meth:`verify`, for callers without an event loop."""
        self.sync()
        with self._lock:
            try:
                anchors = {int(s): h for s, h in self._conn.execute(sql.prune_anchors(D))
                           if s is not None and h is not None}
                try:
                    report = verify_payloads(self._conn.execute(sql.SQLITE_VERIFY_PAYLOADS),
                                             anchors)
                except sqlite3.DatabaseError:
                    # a column SQL cannot quote (a BLOB written by hand): the generic
                    # path finds and names the entry
                    report = verify_rows(self._conn.execute(sql.VERIFY), anchors)
                if check_index and report.ok:
                    report = self._check_trail_index(report)
                if not check_content or not report.ok:
                    return report
                checked, bad, present = 0, [], set()
                for digest, body in self._conn.execute("SELECT digest, body FROM content_blobs"):
                    checked += 1
                    present.add(digest)
                    if digest_text(body) != digest:
                        bad.append(digest)
                report = with_content_check(report, checked, bad)
                if not check_bodies:
                    return report
                def began_pruned(seq: int) -> bool:
                    return bool(self._conn.execute(turn_started_before(D.ph), (seq,))
                                .fetchone())

                return with_body_check(report, self._conn.execute(sql.body_pointers(D)),
                                       present, pruned=bool(anchors),
                                       began_pruned=began_pruned)
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"cannot read ledger {self.path}: {exc}") from exc

    def _check_trail_index(self, report: VerifyReport) -> VerifyReport:
        """``report``, failed if the trail index does not match the chain (the
        caller holds ``_lock``)."""
        held = self._conn.execute("SELECT count(*) FROM trail_index").fetchone()[0]
        found = trail_index.check(self._conn.execute(sql.TRAIL_INDEX_CHECK), int(held))
        if found is None:
            return report
        seq, problem = found
        return dataclasses.replace(report, ok=False, bad_seq=seq, problem=problem,
                                   index_bad=True)

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        """Store what the journal holds, then close; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._feeder is not None:
            self._feeder.stop()
        if self._journal is not None:
            self._journal.close()
        with self._lock:
            self._conn.close()


def _connect(path: str) -> sqlite3.Connection:
    """A connection with the ledger's settings.

    Raises:
        LedgerError: the file cannot be opened or is not a SQLite database.
    """
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA cache_size = {-CACHE_KIB}")
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot open ledger {path}: {exc}") from exc
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


def _frame(head: Head, at: str, batch: list[Draft], contents: Mapping[str, str] | None,
           ) -> tuple[Payload, list[Entry]]:
    """``batch`` chained onto ``head`` as a journal frame's payload (entries, and the
    bodies keyed as stored), and the entries."""
    chained, entries, _ = chain(head, at, batch)
    payload: Payload = {"entries": chained}
    if contents:
        payload["contents"] = _keyed(content_rows(head[0] + 1, entries, contents), at)
    return payload, entries


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


def _split_sql(script: str) -> list[str]:
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
