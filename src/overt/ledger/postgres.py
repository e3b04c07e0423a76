"""The ledger in PostgreSQL: many overt processes on many hosts share one chain.

The chain contract (:mod:`overt.ledger.canonical`) is the same as SQLite's:
one gapless ``seq`` over every process, so ``verify`` catches a changed,
deleted, inserted or reordered entry anywhere. Appends are serialized by a
transaction-scoped advisory lock taken before the head is read; the lock is
released by the commit, so two writers can never chain onto the same head.

Serializing commits would cap a ledger at one fsync per commit for all
workers together (about 400 commits/s on the machine this was written on).
So each process commits in groups: :meth:`PostgresLedger.record` queues its
entries and waits; one writer thread takes everything queued, chains it onto
the head and commits it in one transaction, then wakes every waiter. A turn
still never acts before its records are committed; concurrent turns just share
the commit. A batch that fails on bad data is retried one record set at a
time, so one bad set cannot fail the others.

The URL is libpq's (``postgresql://user@host:5432/db``) plus two optional
query parameters of overt's own: ``schema=NAME``, the schema overt's tables live
in (created if missing, unless opened with ``create=False``; default ``public``),
and ``pool_size=N``, how many connections this process reads on at most (default
4; the writer holds one more).

When the server goes away (a restart, a failover), appends and reads in flight
fail with :class:`LedgerError` and nothing half-written stays: a group is one
transaction. The writer opens a new connection for the next group, and the pool
replaces the connections it finds broken, so the process goes on without a
restart once the server is back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from overt.clock import now_iso
from overt.errors import (
    ExtraMissingError,
    LedgerClosed,
    LedgerConflict,
    LedgerError,
    LedgerUnavailable,
)
from overt.events import Event, LedgerPruned
from overt.ledger import pg_migrate, pg_read, retention, sql, trail_read, tree
from overt.ledger.base import (
    Entry,
    TableRow,
    TrailRows,
    TurnSummary,
    UsageRow,
    VerifyReport,
)
from overt.ledger.canonical import GENESIS
from overt.ledger.chain import (
    ENTRY_COLUMNS,
    Draft,
    Progress,
    Row,
    batch_claims,
    chain,
    checked_body,
    content_rows,
    drafts,
    row_to_entry,
    turn_summary,
)
from overt.ledger.groups import next_group
from overt.ledger.notify import AppendSignal
from overt.ledger.outage import POOL_LOGGER, Outage
from overt.ledger.pg_url import libpq_options, parse_url, url_pool_size
from overt.ledger.pg_url import safe_url as _safe
from overt.ledger.sql import POSTGRES as D

try:
    import psycopg
    import psycopg_pool
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]
    psycopg_pool = None  # type: ignore[assignment]

T = TypeVar("T")
log = logging.getLogger("overt.ledger.postgres")

CHAIN_LOCK = 0x6F76657274  # "overt": the advisory lock that serializes the chain head
MAX_BATCH = 512
READ_WAIT_S = 30.0
"""How long a read waits for a pooled connection before it fails (the server is down)."""
RECONNECT_S = 1.0
"""How long the pool goes on retrying one lost connection (psycopg_pool's default,
5 min, backs its retries off to 16 s and more during an outage, and a read after the
server is back waited that out; short, the next read starts a fresh attempt)."""


# Round trip 1 of an append: the chain lock, then the head it guards.
_BEGIN_LOCK_HEAD = (f"BEGIN; SELECT pg_advisory_xact_lock({CHAIN_LOCK}); "
                    "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
# Then every content body and entry of the group, by COPY (the cheapest path
# per row for client and server), and the commit.
_COPY_CONTENT = "COPY content_blobs (seq, digest, body, created_at) FROM STDIN"
_COPY_ENTRIES = f"COPY audit_log ({ENTRY_COLUMNS}) FROM STDIN"


@dataclass(slots=True)
class _Pending:
    batch: list[Draft]
    contents: Mapping[str, str] | None
    future: concurrent.futures.Future[list[Entry]]
    claims: list[tuple[str, str]]
    inserts: list[tuple[str, tuple[Any, ...]]]


class PostgresLedger:
    """A ledger in one PostgreSQL schema. Open with :meth:`open`; close with :meth:`close`."""

    backend = "postgres"

    def __init__(self, url: str, conninfo: str, schema: str, *,
                 read_only: bool = False) -> None:
        self.url = url
        self.schema = schema
        self.read_only = read_only
        """Opened read-only: every write is refused (:class:`LedgerError`), and the
        server refuses any on its connections (``default_transaction_read_only``)."""
        self._conninfo = conninfo
        self._options = " ".join(filter(None, (
            libpq_options(conninfo), f"-c search_path={schema}",
            "-c default_transaction_read_only=on" if read_only else "")))
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._pool: Any = None
        self._closed = False
        self.read_wait_s = READ_WAIT_S
        self.outage = Outage(f"ledger {_safe(url)}", log)
        """The server out of reach: logged in proportion (:mod:`overt.ledger.outage`)."""
        self._pool_name = f"overt-{schema}-{id(self):x}"
        self._pool_filter = self.outage.pool_filter(self._pool_name)
        """How long a read waits for a connection (the server down: then LedgerError)."""
        self.appended = AppendSignal()
        """Signalled after each append of this process (readers that follow the ledger)."""

    @classmethod
    def open(cls, url: str, *, migrate: bool = True, pool_size: int | None = None,
             read_only: bool = False, create: bool = True) -> PostgresLedger:
        """Connect, create the schema if needed and bring it up to date.

        ``pool_size``: read connections at most (default: the URL's ``pool_size``).
        ``read_only``: write nothing (a role that may only read can open it); the
        schema must be up to date already, and every write is refused.
        ``create=False``: open only a ledger that is there (its schema holds overt's
        tables, at any schema version); create nothing when it is not.

        Raises:
            ExtraMissingError: psycopg is not installed (``overt[postgres]``).
            UsageError: the URL's schema or pool_size is not valid.
            LedgerError: the server cannot be reached; ``create`` false: there is no
                such schema, or it holds no ledger.
            MigrationError: the schema could not be migrated.
        """
        if psycopg is None or psycopg_pool is None:
            raise ExtraMissingError("postgres", "psycopg")
        conninfo, schema = parse_url(url)
        pool_size = pool_size or url_pool_size(url)
        ledger = cls(url, conninfo, schema, read_only=read_only)
        try:
            if read_only:
                with ledger._connect(autocommit=True) as conn:
                    if not create:
                        pg_migrate.refuse_absent(conn, schema, url)
                    pg_migrate.refuse_stale(conn, url)
            elif migrate:
                pg_migrate.migrate(conninfo, schema, url, create=create)
            elif not create:
                with ledger._connect(autocommit=True) as conn:
                    pg_migrate.refuse_absent(conn, schema, url)
            logging.getLogger(POOL_LOGGER).addFilter(ledger._pool_filter)
            ledger._pool = psycopg_pool.ConnectionPool(
                conninfo, min_size=1, max_size=pool_size, open=True, name=ledger._pool_name,
                reconnect_timeout=RECONNECT_S,
                kwargs={"options": ledger._options, "autocommit": True})
        except psycopg.Error as exc:
            logging.getLogger(POOL_LOGGER).removeFilter(ledger._pool_filter)
            raise LedgerError(f"cannot open ledger {_safe(url)}: {exc}") from exc
        if not read_only:
            ledger._writer = threading.Thread(target=ledger._write_loop, daemon=True,
                                              name=f"overt-ledger-writer:{schema}")
            ledger._writer.start()
        return ledger

    def _connect(self, *, autocommit: bool = False) -> Any:
        return psycopg.connect(self._conninfo, options=self._options, autocommit=autocommit)

    # -- schema -------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations (idempotent; safe when processes start at once).

        Raises:
            MigrationError: a migration failed; nothing of it was applied.
        """
        if self.read_only:
            raise LedgerError(f"ledger {_safe(self.url)} is open read-only: not migrated")
        return pg_migrate.migrate(self._conninfo, self.schema, self.url)

    def schema_versions(self) -> list[int]:
        return [r[0] for r in self._read(
            lambda c: c.execute("SELECT version FROM overt_migrations ORDER BY 1").fetchall())]

    # -- writing ------------------------------------------------------------

    async def record(self, events: Sequence[Event],
                     contents: Mapping[str, str] | None = None, *,
                     rows: Sequence[TableRow] = ()) -> list[Entry]:
        return await asyncio.wrap_future(self._submit(events, contents, rows))

    def record_sync(self, events: Sequence[Event],
                    contents: Mapping[str, str] | None = None, *,
                    rows: Sequence[TableRow] = ()) -> list[Entry]:
        """:meth:`record`, for callers without an event loop."""
        return self._submit(events, contents, rows).result()

    def _submit(self, events: Sequence[Event], contents: Mapping[str, str] | None,
                rows: Sequence[TableRow] = ()) -> concurrent.futures.Future[list[Entry]]:
        if self._closed:
            raise LedgerClosed(f"ledger {_safe(self.url)} is closed")
        if self.read_only:
            raise LedgerError(f"ledger {_safe(self.url)} is open read-only: nothing was written")
        try:
            batch = drafts(events)
            inserts = [(sql.insert_row(D, table, list(values)), tuple(values.values()))
                       for table, values in rows]
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"event data is not canonical JSON: {exc}") from exc
        claims = batch_claims(batch)
        future: concurrent.futures.Future[list[Entry]] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()  # a cancelled caller cannot take it back
        self._queue.put(_Pending(batch, contents, future, claims, inserts))
        return future

    async def claimed(self, kind: str, claim: str) -> Entry | None:
        row = await self._aread(
            lambda c: c.execute(sql.claim_exists(D), (kind, claim)).fetchone())
        return row_to_entry(row) if row else None

    def _write_loop(self) -> None:
        conn: Any = None
        while True:
            group, stop = next_group(self._queue, MAX_BATCH)
            if group:
                conn = self._commit_group(conn, group)
            if stop:
                break
        if conn is not None:
            conn.close()

    def _commit_group(self, conn: Any, group: list[_Pending]) -> Any:
        """Commit ``group`` in one transaction; on bad data, each set on its own."""
        try:
            conn, head = self._begin(conn)
            results = self._append(conn, group, head)
        except (psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError) as exc:
            if len(group) == 1:
                group[0].future.set_exception(
                    LedgerError(f"cannot append to ledger {_safe(self.url)}: {exc}"))
                return conn
            for pending in group:
                conn = self._commit_group(conn, [pending])
            return conn
        except psycopg.Error as exc:
            error = self._failure("append", "append to", exc)
            for pending in group:
                pending.future.set_exception(error)
            if conn is not None:
                conn.close()
            return None
        self.outage.answered()
        last, turns = 0, set[str | None]()
        for pending, result in zip(group, results, strict=True):
            if isinstance(result, LedgerConflict):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)
                last = max([last, *(e.seq for e in result)])
                turns.update(e.turn_id for e in result)
        if last:
            self.appended.notify(last, turns)
        return conn

    def _begin(self, conn: Any) -> tuple[Any, tuple[int, str]]:
        """Begin a group's transaction: take the chain lock, read the head it guards
        (one round trip); the connection it began on, and the head.

        A connection kept from an earlier group may have died since (the server
        restarted): it fails here, before anything of this group was sent, so it
        is replaced and the group begins once more on a new one.
        """
        if conn is not None and not conn.closed:
            try:
                return conn, _lock_head(conn)
            except psycopg.OperationalError as exc:
                log.warning("ledger %s: the writer's connection was lost (%s); reconnecting",
                            _safe(self.url), str(exc).strip())
                conn.close()
        conn = self._connect(autocommit=True)
        try:
            return conn, _lock_head(conn)
        except BaseException:
            conn.close()
            raise

    def _append(self, conn: Any, group: list[_Pending],
                head: tuple[int, str]) -> list[list[Entry] | LedgerConflict]:
        """In the transaction :meth:`_begin` opened at ``head``: claims; copy; commit.

        A record set whose claim is taken (on the record, or earlier in the
        group) is left out of the transaction and answered with the conflict.
        """
        at = now_iso()
        results: list[list[Entry] | LedgerConflict] = []
        try:
            entry_rows: list[Row] = []
            bodies: list[tuple[int, str, bytes, str]] = []
            inserts: list[tuple[str, tuple[Any, ...]]] = []
            taken: set[tuple[str, str]] = set()
            for pending in group:
                conflict = next((LedgerConflict(*pair) for pair in pending.claims
                                 if pair in taken
                                 or conn.execute(sql.claim_exists(D), pair).fetchone()), None)
                if conflict is not None:
                    results.append(conflict)
                    continue
                taken.update(pending.claims)
                inserts.extend(pending.inserts)
                first = head[0] + 1
                rows, entries, head = chain(head, at, pending.batch)
                if pending.contents:
                    for seq, digest, body in content_rows(first, entries, pending.contents):
                        bodies.append((seq, digest, body.encode("utf-8"), at))
                entry_rows.extend(rows)  # the trail index: the owner's trigger (migration 17)
                results.append(entries)
            with conn.cursor() as copy_cur:
                if bodies:
                    with copy_cur.copy(_COPY_CONTENT) as copy:
                        for body_row in bodies:
                            copy.write_row(body_row)
                if entry_rows:
                    with copy_cur.copy(_COPY_ENTRIES) as copy:
                        for entry_row in entry_rows:
                            copy.write_row(entry_row)
                for statement, values in inserts:
                    copy_cur.execute(statement, values)
            conn.execute("COMMIT")
        except BaseException:
            if not conn.closed:
                conn.execute("ROLLBACK")
            raise
        return results

    async def prune(self, cutoff: str) -> LedgerPruned:
        """Remove entries and content older than ``cutoff`` (see :mod:`.retention`)."""
        return await asyncio.to_thread(self.prune_sync, cutoff)

    def prune_sync(self, cutoff: str) -> LedgerPruned:
        if self.read_only:
            raise LedgerError(f"ledger {_safe(self.url)} is open read-only: nothing was pruned")
        try:
            with self._connect() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHAIN_LOCK,))
                row = conn.execute(sql.HEAD).fetchone()
                head = (int(row[0]), row[1]) if row else (0, GENESIS)
                record = retention.plan(lambda q, p: conn.execute(q, p).fetchone(), D, cutoff,
                                        head[0])
                rows, _, _ = chain(head, now_iso(), drafts([record]))
                conn.execute(sql.insert_entries(D), rows[0])
                if record.removed_entries:
                    tree.store_prune_rows(conn, D, record.through_seq)  # stand-ins for them
                    # the record sealing the range is the head now: the owner's
                    # SECURITY DEFINER function deletes through it, and nothing else can
                    conn.execute("SELECT overt_prune(%s)", (record.through_seq,))
        except psycopg.Error as exc:
            raise LedgerError(f"cannot prune ledger {_safe(self.url)}: {exc}") from exc
        return record

    # -- reading ------------------------------------------------------------

    def _read(self, work: Callable[[Any], T]) -> T:
        if self._closed:
            raise LedgerClosed(f"ledger {_safe(self.url)} is closed")
        try:
            with self._connection() as conn:
                try:
                    result, lost = work(conn), False
                except psycopg.OperationalError:
                    if not conn.closed:
                        raise
                    lost = True
            if lost:
                # The connection had died (the server restarted since it was last used):
                # the pool drops it; drop the other dead ones it holds, and read again.
                log.warning("ledger %s: a read connection was lost; reading again",
                            _safe(self.url))
                self._pool.check()
                with self._connection() as conn:
                    result = work(conn)
        except psycopg.Error as exc:
            raise self._failure("read", "read", exc) from exc
        self.outage.answered()
        return result

    def _failure(self, what: str, verb: str, exc: psycopg.Error) -> LedgerError:
        """The error to raise for a failed ``what`` (``append``, ``read``): the server out
        of reach is :class:`LedgerUnavailable`, counted in :attr:`outage`.

        A statement the server cancelled (its ``statement_timeout`` or ``lock_timeout``,
        an operator's ``pg_cancel_backend``) is an ``OperationalError`` too, but the
        server answered: a :class:`LedgerError` that says so, not an outage.
        """
        message = f"cannot {verb} ledger {_safe(self.url)}: {exc}"
        if isinstance(exc, (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable)):
            self.outage.answered()
            return LedgerError(f"{message} (the server cancelled the statement: its "
                               "statement_timeout or lock_timeout, or an operator)")
        if not isinstance(exc, psycopg.OperationalError):  # a pool timeout is one too
            return LedgerError(message)
        self.outage.failed(what, exc)
        return LedgerUnavailable(message)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled connection, waited for up to :attr:`read_wait_s`, asked for again
        every ``2 * RECONNECT_S``: a new request starts a new reconnection attempt
        when the pool has none running, so once the server is back a read is served
        within about a second, not after the backoff the outage built up.

        Raises:
            psycopg_pool.PoolTimeout: no connection within ``read_wait_s``.
        """
        deadline = time.monotonic() + self.read_wait_s
        with ExitStack() as held:
            while True:
                left = deadline - time.monotonic()
                try:
                    conn = held.enter_context(self._pool.connection(
                        timeout=max(0.01, min(left, 2 * RECONNECT_S))))
                    break
                except psycopg_pool.PoolTimeout:
                    if deadline - time.monotonic() <= 0:
                        raise psycopg_pool.PoolTimeout(
                            f"couldn't get a connection after {self.read_wait_s:.0f} s"
                        ) from None
            yield conn

    async def _aread(self, work: Callable[[Any], T]) -> T:
        return await asyncio.to_thread(self._read, work)

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of a query on the tables beside the chain (memory reads them so)."""
        return await self._aread(lambda c: c.execute(statement, params).fetchall())

    async def entries(self, *, turn_id: str | None = None, session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None, limit: int | None = None) -> list[Entry]:
        statement, params = sql.select_entries(D, turn_id=turn_id, session_id=session_id,
                                               kinds=kinds, since=since, until=until,
                                               limit=limit)
        rows = await self._aread(lambda c: c.execute(statement, params).fetchall())
        return [row_to_entry(r) for r in rows]

    async def trail_rows(self, *, turn_id: str | None = None,
                         session_id: str | None = None, since: str | None = None,
                         until: str | None = None) -> TrailRows:
        reads = trail_read.statements(D, turn_id=turn_id, session_id=session_id,
                                      since=since, until=until)
        return await self._aread(lambda conn: pg_read.trail(conn, reads))

    async def content(self, digest: str, *, seq: int | None = None) -> str | None:
        params: tuple[Any, ...] = (digest,) if seq is None else (seq, digest)
        statement = sql.select_content(D, near_seq=seq is not None)
        rows = await self._aread(lambda c: c.execute(statement, params).fetchall())
        return checked_body(digest, (r[0] for r in rows))

    async def recent_turns(self, limit: int = 20) -> list[TurnSummary]:
        rows = await self._aread(
            lambda c: c.execute(sql.recent_turns(D), (int(limit),)).fetchall())
        return [turn_summary(r) for r in rows]

    async def usage(self, since: str | None = None, until: str | None = None,
                    by: Sequence[str] = ("route", "model")) -> list[UsageRow]:
        statement = sql.usage(D, by)
        rows = await self._aread(lambda c: c.execute(
            statement, (since or "", until or "\uffff")).fetchall())
        return [UsageRow(r[0], r[1], int(r[4]), int(r[5]), int(r[6]), round(float(r[7]), 10),
                         r[2], r[3]) for r in rows]

    async def spent(self, *, since: str, session_id: str | None = None) -> tuple[int, float]:
        params = (since,) if session_id is None else (since, session_id)
        statement = sql.spent(D, session=session_id is not None)
        row = await self._aread(lambda c: c.execute(statement, params).fetchone())
        return int(row[0]), round(float(row[1]), 10)

    async def count(self, kind: str, since: str | None = None) -> int:
        statement = sql.count(D, kind)
        row = await self._aread(lambda c: c.execute(statement, (kind, since or "")).fetchone())
        return int(row[0])

    async def reply_failures(self, reply_claim: str) -> int:
        row = await self._aread(
            lambda c: c.execute(sql.reply_failures(D), (reply_claim,)).fetchone())
        return int(row[0])

    async def direct_calls(self, tool_call_ids: Sequence[str]) -> list[Entry]:
        rows = [r for ids in sql.chunks(tool_call_ids)
                for r in await self.select(sql.direct_calls(D, len(ids)), ids)]
        return sorted(map(row_to_entry, rows), key=lambda e: e.seq)

    async def unresumed_replies(self) -> list[Entry]:
        rows = await self._aread(lambda c: c.execute(sql.unresumed_replies(D)).fetchall())
        return [row_to_entry(r) for r in rows]

    async def last_error(self) -> Entry | None:
        row = await self._aread(lambda c: c.execute(sql.last_error(D)).fetchone())
        return row_to_entry(row) if row else None

    # -- verification -------------------------------------------------------

    async def verify(self, *, check_content: bool = True, check_index: bool = True,
                     check_bodies: bool = True, progress: Progress | None = None
                     ) -> VerifyReport:
        return await asyncio.to_thread(self.verify_sync, check_content=check_content,
                                       check_index=check_index, check_bodies=check_bodies,
                                       progress=progress)

    def verify_sync(self, *, check_content: bool = True, check_index: bool = True,
                    check_bodies: bool = True, progress: Progress | None = None
                    ) -> VerifyReport:
        """:meth:`verify`, for callers without an event loop (see :func:`.pg_read.verify`)."""
        try:
            with self._connect() as conn:
                return pg_read.verify(conn, check_content, check_index, check_bodies, progress)
        except psycopg.Error as exc:
            raise LedgerError(f"cannot read ledger {_safe(self.url)}: {exc}") from exc

    async def close(self) -> None:
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        if self._writer is not None:
            self._writer.join(timeout=60)
        if self._pool is not None:
            self._pool.close()
        logging.getLogger(POOL_LOGGER).removeFilter(self._pool_filter)


def _lock_head(conn: Any) -> tuple[int, str]:
    cur = conn.execute(_BEGIN_LOCK_HEAD)
    cur.nextset()
    cur.nextset()
    row = cur.fetchone()
    return (int(row[0]), row[1]) if row else (0, GENESIS)
