"""The embedded ledger: one SQLite file in WAL mode, the same shape as PostgreSQL's.

Appends run in the ledger's writer thread, with group commit and its failure
rules (:mod:`overt.ledger.groups`). Here a group's transaction is
``BEGIN IMMEDIATE`` (SQLite's write lock, so processes sharing the file take
turns), and each batch is stored under a savepoint of its own: one whose
once-only claim is taken, or that the database refuses, is rolled back to it and
fails alone.

Reads run on a small pool of threads, each with its own connection, so no
method blocks the event loop; WAL lets them read while the writer writes, and
each sees every record committed before it asked.

``synchronous=NORMAL``: a commit survives the process being killed at any
point; only a power loss can take the last ones. ``:memory:`` is a private
temporary file, removed on close (every thread must see the same database).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from overt.clock import now_iso
from overt.errors import LedgerClosed, LedgerConflict, LedgerError, MigrationError
from overt.events import Event, LedgerPruned
from overt.ledger import memory_check, request_parts, retention, sql, trail_index, trail_read, tree
from overt.ledger.base import (
    Entry,
    TableRow,
    TrailRows,
    TurnSummary,
    UsageRow,
    VerifyReport,
)
from overt.ledger.canonical import GENESIS, digest_text
from overt.ledger.chain import (
    Counted,
    Progress,
    batch_claims,
    began_pruned_on,
    chain,
    checked_body,
    content_checked,
    content_rows,
    drafts,
    row_to_entry,
    turn_summary,
    verify_payloads,
    verify_rows,
    with_body_check,
)
from overt.ledger.groups import Broken, Head, Writer
from overt.ledger.notify import AppendSignal
from overt.ledger.schema import refuse_newer
from overt.ledger.schema.sqlite import (
    FILLS,
    MIGRATIONS,
    MIGRATIONS_TABLE,
    lift_delete_guards,
    restore_delete_guards,
)
from overt.ledger.sql import SQLITE as D
from overt.ledger.sqlite_conn import connect, refuse_absent, split_sql, transaction

READERS = 4
T = TypeVar("T")
Work = Callable[[sqlite3.Connection, Head, str], tuple[Any, Head]]
"""A batch's part of a group transaction: given the connection, the head and the
group's time, it stores its rows and returns its result and the new head."""


class SqliteLedger:
    """A ledger in one SQLite file. Open with :meth:`open`; close with :meth:`close`."""

    backend = "sqlite"

    def __init__(self, path: str, temporary: str | None = None, *,
                 read_only: bool = False, clock: Callable[[], str] = now_iso) -> None:
        self.path = path
        self.url = path
        self.read_only = read_only
        """Opened read-only: every write is refused (:class:`LedgerError`), nothing written."""
        self._temporary = temporary
        self._writer: Writer[sqlite3.Connection, Work] = Writer(
            _Store(path), f"ledger {path}", thread_name="overt-ledger-writer",
            notify=self._notify, clock=clock)
        self._readers = concurrent.futures.ThreadPoolExecutor(
            READERS, thread_name_prefix="overt-ledger-reader")
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self.appended = AppendSignal()
        """Signalled after each append of this process (readers that follow the ledger)."""

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
        ledger = cls(p, temporary, read_only=read_only, clock=clock)
        try:
            conn = connect(p, read_only=read_only)
            try:
                if read_only:
                    _refuse_stale(conn, p)
                    conn.close()
                    return ledger
                if migrate:
                    ledger._migrate(conn)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            ledger._readers.shutdown()
            ledger._remove_temporary()
            raise
        ledger._writer = Writer(_Store(p), f"ledger {p}", thread_name="overt-ledger-writer",
                                notify=ledger._notify, conn=conn, clock=clock)
        ledger._writer.start()
        return ledger

    # -- schema -------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied (empty: up to date).

        Raises:
            MigrationError: a migration failed; nothing of it was applied.
        """
        if self.read_only:
            raise LedgerError(f"ledger {self.path} is open read-only: not migrated")
        conn = connect(self.path)
        try:
            return self._migrate(conn)
        finally:
            conn.close()

    def _migrate(self, conn: sqlite3.Connection) -> list[int]:
        """Safe when several processes start at once: each migration is applied under
        the write lock, after re-reading what is already applied."""
        applied: list[int] = []
        try:
            conn.executescript(MIGRATIONS_TABLE)
            refuse_newer((r[0] for r in conn.execute("SELECT version FROM overt_migrations")),
                         self.path)
            for version, _name, script in MIGRATIONS:
                with transaction(conn):
                    if conn.execute("SELECT 1 FROM overt_migrations WHERE version = ?",
                                    (version,)).fetchone():
                        continue
                    for statement in split_sql(script):
                        conn.execute(statement)
                    fill = FILLS.get(version)
                    if fill is not None:
                        fill(conn)
                    conn.execute("INSERT INTO overt_migrations VALUES (?, ?, ?)",
                                 (version, _name, now_iso()))
                    applied.append(version)
        except MigrationError:
            raise
        except (sqlite3.DatabaseError, LedgerError) as exc:
            raise MigrationError(f"cannot migrate ledger {self.path}: {exc}") from exc
        return applied

    def schema_versions(self) -> list[int]:
        return [r[0] for r in self._query("SELECT version FROM overt_migrations ORDER BY 1")]

    # -- writing ------------------------------------------------------------

    async def record(self, events: Sequence[Event],
                     contents: Mapping[str, str] | None = None, *,
                     rows: Sequence[TableRow] = ()) -> list[Entry]:
        result: list[Entry] = await asyncio.wrap_future(
            self._submit(self._record_work(events, contents, rows)))
        return result

    def record_sync(self, events: Sequence[Event],
                    contents: Mapping[str, str] | None = None, *,
                    rows: Sequence[TableRow] = ()) -> list[Entry]:
        """:meth:`record`, for callers without an event loop."""
        result: list[Entry] = self._submit(self._record_work(events, contents, rows)).result()
        return result

    def _record_work(self, events: Sequence[Event], contents: Mapping[str, str] | None,
                     rows: Sequence[TableRow]) -> Work:
        """What the writer does for one :meth:`record` (checked here, off the writer).

        Raises:
            LedgerError: the data is not canonical JSON, or a table is not plain.
            LedgerConflict: the batch claims one (kind, claim) twice.
        """
        try:
            batch = drafts(events)
            inserts = [(sql.insert_row(D, table, list(values)), list(values.values()))
                       for table, values in rows]
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"event data is not canonical JSON: {exc}") from exc
        claims = batch_claims(batch)

        def work(conn: sqlite3.Connection, head: Head, at: str) -> tuple[list[Entry], Head]:
            for pair in claims:
                if conn.execute(sql.claim_exists(D), pair).fetchone():
                    raise LedgerConflict(*pair)
            entries: list[Entry] = []
            if batch:
                entry_rows, entries, head = chain(head, at, batch)
                body_seqs: dict[str, int] = {}
                if contents:
                    bodies = content_rows(entry_rows[0][0], entries, contents)
                    body_seqs = {digest: seq for seq, digest, _ in bodies}
                    conn.executemany(sql.insert_content(D), _keyed(bodies, at))
                conn.executemany(sql.insert_entries(D), entry_rows)
                for statement, indexed in trail_index.inserts(entries, body_seqs, D.ph):
                    conn.executemany(statement, indexed)
            for statement, values in inserts:
                conn.execute(statement, values)
            return entries, head

        return work

    def _submit(self, work: Work, *, alone: bool = False) -> concurrent.futures.Future[Any]:
        if self.read_only:
            raise LedgerError(f"ledger {self.path} is open read-only: nothing was written")
        return self._writer.submit(work, alone=alone)

    def _notify(self, last: int, turns: set[str | None]) -> None:
        self.appended.notify(last, turns)

    async def claimed(self, kind: str, claim: str) -> Entry | None:
        rows = await self._aquery(sql.claim_exists(D), (kind, claim))
        return row_to_entry(rows[0]) if rows else None

    async def prune(self, cutoff: str) -> LedgerPruned:
        """Remove entries and content older than ``cutoff`` (see :mod:`.retention`)."""
        record: LedgerPruned = await asyncio.wrap_future(
            self._submit(self._prune_work(cutoff), alone=True))
        return record

    def prune_sync(self, cutoff: str) -> LedgerPruned:
        record: LedgerPruned = self._submit(self._prune_work(cutoff), alone=True).result()
        return record

    @staticmethod
    def _prune_work(cutoff: str) -> Work:
        def work(conn: sqlite3.Connection, head: Head, at: str) -> tuple[LedgerPruned, Head]:
            record = retention.plan(lambda q, p: conn.execute(q, p).fetchone(), D, cutoff,
                                    head[0])
            entry_rows, _, head = chain(head, at, drafts([record]))
            conn.executemany(sql.insert_entries(D), entry_rows)
            if record.removed_entries:
                through = record.through_seq
                tree.store_prune_rows(conn, D, through)  # the tree's stand-ins for them
                retention.carry_bodies(conn, D, through)  # bodies kept entries still name
                lift_delete_guards(conn)  # DDL in this transaction: a failure takes it back
                conn.execute(sql.delete_content_through(D), (through,))
                conn.execute(sql.delete_trail_index_through(D), (through,))
                conn.execute(sql.delete_entries_through(D), (through,))
                restore_delete_guards(conn)
            return record, head

        return work

    # -- reading ------------------------------------------------------------

    def _reader_conn(self) -> sqlite3.Connection:
        """This reader thread's connection, opened on its first read."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self.path, read_only=self.read_only)
            with self._conns_lock:
                self._reader_conns.append(conn)
        return conn

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return work(self._reader_conn())
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"cannot read ledger {self.path}: {exc}") from exc

    def _read_future(self, work: Callable[[sqlite3.Connection], T]
                     ) -> concurrent.futures.Future[T]:
        if self._closed:
            raise LedgerClosed(f"ledger {self.path} is closed")
        try:
            return self._readers.submit(self._run, work)
        except RuntimeError as exc:  # shut down by a close meanwhile
            raise LedgerClosed(f"ledger {self.path} is closed") from exc

    async def _aread(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.wrap_future(self._read_future(work))

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """A query's rows, read on a reader thread (for callers without an event loop)."""
        return self._read_future(lambda c: c.execute(statement, params).fetchall()).result()

    async def _aquery(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._aread(lambda c: c.execute(statement, params).fetchall())

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of a query on the tables beside the chain (memory reads them so)."""
        return await self._aquery(statement, params)

    async def entries(self, *, turn_id: str | None = None, session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None, limit: int | None = None) -> list[Entry]:
        statement, params = sql.select_entries(D, turn_id=turn_id, session_id=session_id,
                                               kinds=kinds, since=since, until=until,
                                               limit=limit)
        return [row_to_entry(r) for r in await self._aquery(statement, params)]

    async def trail_rows(self, *, turn_id: str | None = None,
                         session_id: str | None = None, since: str | None = None,
                         until: str | None = None) -> TrailRows:
        reads = trail_read.statements(D, turn_id=turn_id, session_id=session_id,
                                      since=since, until=until)
        return await self._aread(lambda conn: trail_read.read(conn, reads))

    async def content(self, digest: str, *, seq: int | None = None) -> str | None:
        if seq is None:
            rows = await self._aquery(sql.select_content(D, near_seq=False), (digest,))
        else:
            rows = await self._aquery(sql.select_content(D, near_seq=True), (seq, digest))
        return checked_body(digest, (r[0] for r in rows))

    async def recent_turns(self, limit: int = 20) -> list[TurnSummary]:
        return [turn_summary(r) for r in await self._aquery(sql.recent_turns(D), (int(limit),))]

    async def usage(self, since: str | None = None, until: str | None = None,
                    by: Sequence[str] = ("route", "model")) -> list[UsageRow]:
        rows = await self._aquery(sql.usage(D, by), (since or "", until or "\uffff"))
        return [UsageRow(r[0], r[1], int(r[4]), int(r[5]), int(r[6]), round(float(r[7]), 10),
                         r[2], r[3]) for r in rows]

    async def spent(self, *, since: str, session_id: str | None = None) -> tuple[int, float]:
        params = (since,) if session_id is None else (since, session_id)
        row = (await self._aquery(sql.spent(D, session=session_id is not None), params))[0]
        return int(row[0]), round(float(row[1]), 10)

    async def count(self, kind: str, since: str | None = None) -> int:
        return int((await self._aquery(sql.count(D, kind), (kind, since or "")))[0][0])

    async def reply_failures(self, reply_claim: str) -> int:
        return int((await self._aquery(sql.reply_failures(D), (reply_claim,)))[0][0])

    async def direct_calls(self, tool_call_ids: Sequence[str]) -> list[Entry]:
        rows = [r for ids in sql.chunks(tool_call_ids)
                for r in await self.select(sql.direct_calls(D, len(ids)), ids)]
        return sorted(map(row_to_entry, rows), key=lambda e: e.seq)

    async def unresumed_replies(self) -> list[Entry]:
        return [row_to_entry(r) for r in await self._aquery(sql.unresumed_replies(D))]

    async def last_error(self) -> Entry | None:
        rows = await self._aquery(sql.last_error(D))
        return row_to_entry(rows[0]) if rows else None

    # -- verification -------------------------------------------------------

    async def verify(self, *, check_content: bool = True, check_index: bool = True,
                     check_bodies: bool = True, progress: Progress | None = None
                     ) -> VerifyReport:
        return await self._aread(lambda c: _verify(c, check_content, check_index,
                                                   check_bodies, progress))

    def verify_sync(self, *, check_content: bool = True, check_index: bool = True,
                    check_bodies: bool = True, progress: Progress | None = None
                    ) -> VerifyReport:
        """:meth:`verify`, for callers without an event loop."""
        return self._read_future(lambda c: _verify(c, check_content, check_index,
                                                   check_bodies, progress)).result()

    async def close(self) -> None:
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        """Answer what is still queued with :class:`LedgerClosed`, let the writer finish
        the group it holds, stop it and close every connection; safe to call twice
        (:meth:`overt.ledger.groups.Writer.close`)."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        self._readers.shutdown(wait=True)
        with self._conns_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
        self._remove_temporary()

    def _remove_temporary(self) -> None:
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)


class _Store:
    """SQLite's part of the writer (:class:`overt.ledger.groups.Store`)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def connect(self) -> sqlite3.Connection:
        return connect(self.path)

    def begin(self, conn: sqlite3.Connection) -> Head:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(sql.HEAD).fetchone()
        return (int(row[0]), row[1]) if row else (0, GENESIS)

    def stage(self, conn: sqlite3.Connection, work: Work, head: Head, at: str,
              alone: bool) -> tuple[Any, Head]:
        """A batch alone is the transaction; in a group, it is a savepoint of its own."""
        if not alone:
            _undo(conn, "SAVEPOINT batch")
        try:
            result, head = work(conn, head, at)
        except Exception:
            _undo(conn, "ROLLBACK" if alone else "ROLLBACK TO batch")
            if not alone:
                _undo(conn, "RELEASE batch")
            raise
        if not alone:
            _undo(conn, "RELEASE batch")
        return result, head

    def commit(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:  # a batch alone that failed has rolled it back
            conn.execute("COMMIT")

    def rollback(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def close(self, conn: sqlite3.Connection) -> None:
        conn.close()

    def refused(self, exc: Exception) -> bool:
        return False  # each batch has its savepoint: a refused one already failed alone

    def stale(self, exc: Exception) -> bool:
        return False

    def failure(self, exc: Exception) -> LedgerError:
        return LedgerError(f"cannot write ledger {self.path}: {exc}")


def _undo(conn: sqlite3.Connection, statement: str) -> None:
    """A statement of the group's transaction itself (a savepoint): its failure is
    the group's (:class:`~overt.ledger.groups.Broken`)."""
    try:
        conn.execute(statement)
    except sqlite3.Error as exc:
        raise Broken(statement) from exc


def _verify(conn: sqlite3.Connection, check_content: bool, check_index: bool,
            check_bodies: bool, progress: Progress | None = None) -> VerifyReport:
    """Verify in one read transaction: one snapshot, whatever the writer does meanwhile."""
    conn.execute("BEGIN")
    try:
        counted = Counted.of(conn, progress, check_index, check_content, check_bodies)
        anchors = {int(s): h for s, h in conn.execute(sql.prune_anchors(D))
                   if s is not None and h is not None}
        try:
            report = verify_payloads(counted.rows(conn.execute(sql.SQLITE_VERIFY_PAYLOADS)),
                                     anchors)
        except sqlite3.DatabaseError:
            # a column SQL cannot quote (a BLOB written by hand): the generic
            # path finds and names the entry (counted from the chain's start again)
            counted.checked = 0
            report = verify_rows(counted.rows(conn.execute(sql.VERIFY)), anchors)
        if check_index and report.ok:
            report = trail_index.verified(report, conn, sql.trail_index_check(D), anchors,
                                          counted.rows)
            report = memory_check.verified(report, conn, D)
        if not check_content or not report.ok:
            return report
        walk = request_parts.verify_walk(conn, D, bool(anchors)) if check_bodies else None
        report, present = content_checked(
            report, request_parts.verify_rows(
                counted.rows(conn.execute(request_parts.newest_first(D))), walk),
            lambda body: digest_text(body) if isinstance(body, str) else "")  # a BLOB: by hand
        if not check_bodies:
            return report
        report = with_body_check(report, counted.rows(conn.execute(sql.body_pointers(D))),
                                 present, pruned=bool(anchors),
                                 began_pruned=began_pruned_on(conn, D.ph))
        assert walk is not None
        return request_parts.with_parts_check(report, walk, present,
                                              request_parts.reader(conn, D))
    finally:
        conn.execute("COMMIT")


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
