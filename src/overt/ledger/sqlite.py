"""The embedded ledger: one SQLite file in WAL mode.

One writer at a time: every append takes SQLite's write lock (``BEGIN
IMMEDIATE``), chains its entries onto the head and commits before releasing
it, so several processes can share a file and the chain stays one sequence. A
busy timeout makes a writer wait for the lock instead of failing; no
``database is locked`` reaches a user unless the lock is held for 30 s.

``synchronous=NORMAL`` under WAL: a commit survives the process being killed
at any point; only a power loss can take the last commits, never corrupt
earlier ones. SQLite's own auto-checkpoint keeps the WAL short (a thread doing
passive checkpoints off the commit path was tried and measured no faster).

Calls run inline on the caller's thread: a commit costs tens of microseconds,
less than handing it to a worker thread would. The chain head is cached
between appends; when another process appended meanwhile, the cached ``seq``
collides with the primary key, and the append re-reads the head and retries.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from overt.clock import now_iso
from overt.errors import LedgerConflict, LedgerError, MigrationError
from overt.events import Event, LedgerPruned
from overt.ledger import retention, sql
from overt.ledger.base import (
    Entry,
    TableRow,
    TrailRow,
    TurnSummary,
    UsageRow,
    VerifyReport,
)
from overt.ledger.canonical import GENESIS, digest_text
from overt.ledger.chain import (
    Draft,
    batch_claims,
    chain,
    content_rows,
    drafts,
    row_to_entry,
    verify_payloads,
    verify_rows,
    with_content_check,
)
from overt.ledger.schema.sqlite import MIGRATIONS, MIGRATIONS_TABLE
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
        self._head: tuple[int, str] | None = None
        self._closed = False
        self.path = path
        self.url = path

    @classmethod
    def open(cls, path: str | Path, *, migrate: bool = True) -> SqliteLedger:
        """Open (creating if needed) the ledger at ``path`` and bring its schema up to date.

        Raises:
            LedgerError: the file cannot be opened or is not a SQLite database.
            MigrationError: the schema could not be migrated.
        """
        p = str(path)
        if p != ":memory:":
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(p, isolation_level=None, check_same_thread=False,
                                   timeout=BUSY_TIMEOUT_MS / 1000)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA cache_size = {-CACHE_KIB}")
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"cannot open ledger {p}: {exc}") from exc
        ledger = cls(conn, p)
        if migrate:
            ledger.migrate()
        return ledger

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
                        self._conn.execute("INSERT INTO overt_migrations VALUES (?, ?, ?)",
                                           (version, name, now_iso()))
                        applied.append(version)
            except sqlite3.DatabaseError as exc:
                raise MigrationError(f"cannot migrate ledger {self.path}: {exc}") from exc
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
            inserts = [(sql.insert_row(D, table, list(values)), tuple(values.values()))
                       for table, values in rows]
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"event data is not canonical JSON: {exc}") from exc
        at = now_iso()
        return self._locked_write(lambda: self._append(at, batch, contents, inserts))

    def _locked_write(self, work: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise LedgerError(f"ledger {self.path} is closed")
            for attempt in (1, 2, 3):
                try:
                    with self._write():
                        return work()
                except sqlite3.IntegrityError as exc:
                    # Another writer moved the head since we cached it: re-read, retry.
                    self._head = None
                    if attempt == 3:
                        raise LedgerError(f"cannot append to ledger {self.path}: {exc}") from exc
                except sqlite3.DatabaseError as exc:
                    self._head = None
                    raise LedgerError(f"cannot write ledger {self.path}: {exc}") from exc
        raise AssertionError("unreachable")

    def _append(self, at: str, batch: list[Draft], contents: Mapping[str, str] | None,
                inserts: Sequence[tuple[str, tuple[Any, ...]]] = ()) -> list[Entry]:
        """Inside a write transaction: claims checked, content, entries chained onto
        the head, then the rows beside the chain."""
        for kind, claim in batch_claims(batch):
            if self._conn.execute(sql.claim_exists(D), (kind, claim)).fetchone():
                raise LedgerConflict(kind, claim)
        if self._head is None:
            row = self._conn.execute(sql.HEAD).fetchone()
            self._head = (row[0], row[1]) if row else (0, GENESIS)
        rows, entries, head = chain(self._head, at, batch)
        if contents:
            self._conn.executemany(sql.insert_content(D), _keyed(
                content_rows(self._head[0] + 1, entries, contents), at))
        self._conn.executemany(sql.insert_entries(D), rows)
        for statement, values in inserts:
            self._conn.execute(statement, values)
        self._head = head
        return entries

    async def claimed(self, kind: str, claim: str) -> Entry | None:
        rows = self._query(sql.claim_exists(D), (kind, claim))
        return row_to_entry(rows[0]) if rows else None

    async def prune(self, cutoff: str) -> LedgerPruned:
        """Remove entries and content older than ``cutoff`` (see :mod:`.retention`)."""
        return self.prune_sync(cutoff)

    def prune_sync(self, cutoff: str) -> LedgerPruned:
        def work() -> LedgerPruned:
            self._head = None
            head = self._conn.execute(sql.HEAD).fetchone()
            record = retention.plan(lambda q, p: self._conn.execute(q, p).fetchone(), D,
                                    cutoff, head[0] if head else 0)
            self._append(now_iso(), drafts([record]), None)
            if record.removed_entries:
                self._conn.execute("INSERT INTO overt_prune_gate VALUES (?)",
                                   (record.through_seq,))
                self._conn.execute(sql.delete_content_through(D), (record.through_seq,))
                self._conn.execute(sql.delete_entries_through(D), (record.through_seq,))
                self._conn.execute("DELETE FROM overt_prune_gate")
            return record

        return self._locked_write(work)

    # -- reading ------------------------------------------------------------

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
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

    async def trail_rows(self, kinds: Sequence[str], *, turn_id: str | None = None,
                         session_id: str | None = None, since: str | None = None,
                         until: str | None = None) -> list[TrailRow]:
        statement, params = sql.trail(D, kinds, turn_id=turn_id, session_id=session_id,
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

    async def verify(self, *, check_content: bool = True) -> VerifyReport:
        return self.verify_sync(check_content=check_content)

    def verify_sync(self, *, check_content: bool = True) -> VerifyReport:
        """:meth:`verify`, for callers without an event loop."""
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
                if not check_content or not report.ok:
                    return report
                checked, bad = 0, []
                for digest, body in self._conn.execute("SELECT digest, body FROM content_blobs"):
                    checked += 1
                    if digest_text(body) != digest:
                        bad.append(digest)
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"cannot read ledger {self.path}: {exc}") from exc
        return with_content_check(report, checked, bad)

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._conn.close()


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
