"""The embedded ledger: one SQLite file in WAL mode.

One writer at a time: every append takes SQLite's write lock with
``BEGIN IMMEDIATE``, reads the chain head, and commits its entries before
releasing it, so several processes can share a file and the chain stays one
sequence. A busy timeout makes a writer wait for the lock instead of failing.

``synchronous=NORMAL`` under WAL: a commit survives the process being killed
at any point (the WAL is written before ``COMMIT`` returns); only a power loss
can take the last commits, never corrupt earlier ones.

Calls run inline on the caller's thread: a commit costs tens of microseconds,
less than handing it to a worker thread would. The chain head is cached
between appends; when another process appended meanwhile, the cached ``seq``
collides with the primary key, and the append re-reads the head and retries.
WAL checkpoints run on a thread of their own (see :mod:`.checkpoint`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from overt.clock import now_iso
from overt.errors import LedgerError, MigrationError
from overt.events import Event
from overt.ids import new_ulid
from overt.ledger.base import Entry, TurnSummary, UsageRow, VerifyReport
from overt.ledger.canonical import (
    GENESIS,
    canonical_json,
    chain_hash,
    digest_text,
    entry_payload,
)
from overt.ledger.checkpoint import Checkpointer
from overt.ledger.sqlite_schema import FAILURE_CONDITION, MIGRATIONS, MIGRATIONS_TABLE

BUSY_TIMEOUT_MS = 30_000
_ENTRY_COLUMNS = "seq, id, kind, at, turn_id, session_id, data, prev_hash, hash"


def _entry(row: Sequence[Any]) -> Entry:
    return Entry(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]), row[7],
                 row[8])


class SqliteLedger:
    """A ledger in one SQLite file. Open with :meth:`open`."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._head: tuple[int, str] | None = None
        self._checkpointer: Checkpointer | None = None
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
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"cannot open ledger {p}: {exc}") from exc
        ledger = cls(conn, p)
        if migrate:
            ledger.migrate()
        if p != ":memory:":
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            ledger._checkpointer = Checkpointer(p)
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
                for version, name, sql in MIGRATIONS:
                    with self._write():
                        done = self._conn.execute(
                            "SELECT 1 FROM overt_migrations WHERE version = ?", (version,)
                        ).fetchone()
                        if done:
                            continue
                        for statement in _split_sql(sql):
                            self._conn.execute(statement)
                        self._conn.execute(
                            "INSERT INTO overt_migrations VALUES (?, ?, ?)",
                            (version, name, now_iso()),
                        )
                        applied.append(version)
            except sqlite3.DatabaseError as exc:
                raise MigrationError(f"cannot migrate ledger {self.path}: {exc}") from exc
        return applied

    def schema_versions(self) -> list[int]:
        with self._lock:
            rows = self._conn.execute("SELECT version FROM overt_migrations ORDER BY version")
            return [r[0] for r in rows]

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
                     contents: Mapping[str, str] | None = None) -> list[Entry]:
        return self.record_sync(events, contents)

    def record_sync(self, events: Sequence[Event],
                    contents: Mapping[str, str] | None = None) -> list[Entry]:
        """:meth:`record`, for callers without an event loop."""
        at = now_iso()
        drafts = [(ev.kind, ev.turn_id, ev.session_id, ev.data()) for ev in events]
        try:
            datas = [canonical_json(d[3]) for d in drafts]
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"event data is not canonical JSON: {exc}") from exc
        with self._lock:
            if self._closed:
                raise LedgerError(f"ledger {self.path} is closed")
            for attempt in (1, 2, 3):
                try:
                    entries = self._append(at, drafts, datas, contents)
                except sqlite3.IntegrityError as exc:
                    # Another writer moved the head since we cached it: re-read, retry.
                    self._head = None
                    if attempt == 3:
                        raise LedgerError(f"cannot append to ledger {self.path}: {exc}") from exc
                    continue
                except sqlite3.DatabaseError as exc:
                    self._head = None
                    raise LedgerError(f"cannot append to ledger {self.path}: {exc}") from exc
                break
        if self._checkpointer is not None:
            self._checkpointer.committed()
        return entries

    def _append(self, at: str, drafts: list[tuple[str, str | None, str | None, dict[str, Any]]],
                datas: list[str], contents: Mapping[str, str] | None) -> list[Entry]:
        """One transaction: content, then entries chained onto the head."""
        entries: list[Entry] = []
        with self._write():
            if self._head is None:
                row = self._conn.execute(
                    "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
                self._head = (row[0], row[1]) if row else (0, GENESIS)
            seq, prev = self._head
            rows = []
            for (kind, turn_id, session_id, data), data_json in zip(drafts, datas, strict=True):
                seq += 1
                entry_id = new_ulid()
                digest = chain_hash(prev, entry_payload(
                    seq, entry_id, kind, at, turn_id, session_id, data_json))
                rows.append((seq, entry_id, kind, at, turn_id, session_id, data_json, prev,
                             digest))
                entries.append(Entry(seq, entry_id, kind, at, turn_id, session_id, data, prev,
                                     digest))
                prev = digest
            if contents:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO content_blobs VALUES (?, ?, ?)",
                    [(d, body, at) for d, body in contents.items()],
                )
            self._conn.executemany(
                f"INSERT INTO audit_log ({_ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        self._head = (seq, prev)
        return entries

    # -- reading ------------------------------------------------------------

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"cannot read ledger {self.path}: {exc}") from exc

    async def entries(self, *, turn_id: str | None = None, session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None, limit: int | None = None) -> list[Entry]:
        where, params = [], []
        for column, value in (("turn_id", turn_id), ("session_id", session_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if kinds:
            where.append(f"kind IN ({', '.join('?' * len(kinds))})")
            params.extend(kinds)
        if since is not None:
            where.append("at >= ?")
            params.append(since)
        if until is not None:
            where.append("at < ?")
            params.append(until)
        sql = f"SELECT {_ENTRY_COLUMNS} FROM audit_log"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_entry(r) for r in self._query(sql, params)]

    async def content(self, digest: str) -> str | None:
        rows = self._query("SELECT body FROM content_blobs WHERE digest = ?", (digest,))
        return rows[0][0] if rows else None

    async def recent_turns(self, limit: int = 20) -> list[TurnSummary]:
        rows = self._query(
            "SELECT turn_id, session_id, started_at, source, model, status, tools_used, "
            "duration_ms FROM turns ORDER BY started_at DESC, turn_id DESC LIMIT ?",
            (int(limit),),
        )
        return [
            TurnSummary(r[0], r[1], r[2], r[3], r[4], r[5],
                        json.loads(r[6]) if r[6] is not None else None, r[7])
            for r in rows
        ]

    async def usage(self, since: str | None = None, until: str | None = None) -> list[UsageRow]:
        rows = self._query(
            "SELECT json_extract(data, '$.route'), json_extract(data, '$.model'), count(*), "
            "coalesce(sum(json_extract(data, '$.input_tokens')), 0), "
            "coalesce(sum(json_extract(data, '$.output_tokens')), 0), "
            "coalesce(sum(json_extract(data, '$.cost_usd')), 0.0) "
            "FROM audit_log WHERE kind = 'inference' AND at >= ? AND at < ? "
            "GROUP BY 1, 2 ORDER BY 6 DESC, 4 DESC",
            (since or "", until or "\uffff"),
        )
        return [UsageRow(r[0], r[1], r[2], r[3], r[4], round(r[5], 10)) for r in rows]

    async def count(self, kind: str, since: str | None = None) -> int:
        rows = self._query("SELECT count(*) FROM audit_log WHERE kind = ? AND at >= ?",
                           (kind, since or ""))
        return int(rows[0][0])

    async def last_error(self) -> Entry | None:
        rows = self._query(
            f"SELECT {_ENTRY_COLUMNS} FROM audit_log WHERE {FAILURE_CONDITION} "
            "ORDER BY seq DESC LIMIT 1"
        )
        return _entry(rows[0]) if rows else None

    # -- verification -------------------------------------------------------

    async def verify(self, *, check_content: bool = True) -> VerifyReport:
        return self.verify_sync(check_content=check_content)

    def verify_sync(self, *, check_content: bool = True) -> VerifyReport:
        """:meth:`verify`, for callers without an event loop."""
        with self._lock:
            try:
                report = _verify_rows(self._conn.execute(
                    f"SELECT {_ENTRY_COLUMNS} FROM audit_log ORDER BY seq"))
                if not check_content or not report.ok:
                    return report
                checked, bad = 0, []
                for digest, body in self._conn.execute("SELECT digest, body FROM content_blobs"):
                    checked += 1
                    if digest_text(body) != digest:
                        bad.append(digest)
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"cannot read ledger {self.path}: {exc}") from exc
        if bad:
            return VerifyReport(False, report.entries, report.first_seq, report.last_seq,
                                report.head_hash, None,
                                f"{len(bad)} content bodies do not match their digest",
                                checked, bad)
        return VerifyReport(True, report.entries, report.first_seq, report.last_seq,
                            report.head_hash, content_checked=checked)

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._conn.close()
        if self._checkpointer is not None:
            self._checkpointer.stop()


def _verify_rows(rows: Iterator[Sequence[Any]]) -> VerifyReport:
    """Recompute the chain over ``rows`` (in seq order); see :mod:`overt.ledger.canonical`."""
    prev = GENESIS
    expected_seq = 1
    count = 0
    first: int | None = None
    for seq, entry_id, kind, at, turn_id, session_id, data, prev_hash, digest in rows:
        if first is None:
            first = seq
        if seq != expected_seq:
            problem = "missing entry before it" if seq > expected_seq else "sequence out of order"
            return VerifyReport(False, count, first, expected_seq - 1, prev, seq, problem)
        if prev_hash != prev:
            return VerifyReport(False, count, first, seq - 1, prev, seq,
                                "prev_hash does not match the previous entry")
        recomputed = chain_hash(prev, entry_payload(seq, entry_id, kind, at, turn_id,
                                                    session_id, data))
        if recomputed != digest:
            return VerifyReport(False, count, first, seq - 1, prev, seq,
                                "hash does not match the entry's contents")
        prev = digest
        expected_seq += 1
        count += 1
    return VerifyReport(True, count, first, expected_seq - 1 if count else None, prev)


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
