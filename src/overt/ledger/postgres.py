"""The ledger in PostgreSQL: many overt processes on many hosts share one chain.

The chain contract (:mod:`overt.ledger.canonical`) is the same as SQLite's:
one gapless ``seq`` over every process, so ``verify`` catches a changed,
deleted, inserted or reordered entry anywhere. Appends are serialized by a
transaction-scoped advisory lock taken before the head is read; the lock is
released by the commit, so two writers can never chain onto the same head.

Serializing commits would cap a ledger at one fsync per commit for all
workers together, so each process commits in groups, through the ledger's
writer thread and its failure rules (:mod:`overt.ledger.groups`). Here a
group's batches are staged and written by ``COPY`` at its commit; a group the
server refuses on bad data is committed again one batch at a time, so one bad
batch cannot fail the others. Reads run on threads of the ledger's own, as many
as its pool has connections (never the event loop's default executor, which the
local model and sync tools share).

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
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
from overt.ledger.groups import Broken, Head, Writer
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


Work = Callable[[Any, Head, str, "_Staged"], tuple[Any, Head]]
"""A batch's part of a group transaction: given the connection, the head, the
group's time and what the group has staged so far, it checks its claims, stages
its rows (changing nothing staged when it fails) and returns its result and the
new head."""


@dataclass(slots=True)
class _Staged:
    """What a group's batches stage, written by ``COPY`` when the group commits."""

    entries: list[Row] = field(default_factory=list)
    """The trail index is the owner's trigger's to write (migration 17)."""
    bodies: list[tuple[int, str, bytes, str]] = field(default_factory=list)
    inserts: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    claims: set[tuple[str, str]] = field(default_factory=set)


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
        self._pool: Any = None
        self._readers: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False
        self.read_wait_s = READ_WAIT_S
        self.outage = Outage(f"ledger {_safe(url)}", log)
        """The server out of reach: logged in proportion (:mod:`overt.ledger.outage`)."""
        self._pool_name = f"overt-{schema}-{id(self):x}"
        self._pool_filter = self.outage.pool_filter(self._pool_name)
        """How long a read waits for a connection (the server down: then LedgerError)."""
        self.appended = AppendSignal()
        """Signalled after each append of this process (readers that follow the ledger)."""
        self._writer: Writer[Any, Work] = Writer(
            _Store(self), f"ledger {_safe(url)}", thread_name=f"overt-ledger-writer:{schema}",
            notify=self._notify)

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
        ledger._readers = concurrent.futures.ThreadPoolExecutor(
            pool_size, thread_name_prefix=f"overt-ledger-reader:{schema}")
        if not read_only:
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

        A batch whose claim is taken (on the record, or earlier in the group)
        stages nothing and fails with the conflict.

        Raises:
            LedgerError: the data is not canonical JSON, or a table is not plain.
            LedgerConflict: the batch claims one (kind, claim) twice.
        """
        try:
            batch = drafts(events)
            inserts = [(sql.insert_row(D, table, list(values)), tuple(values.values()))
                       for table, values in rows]
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"event data is not canonical JSON: {exc}") from exc
        claims = batch_claims(batch)

        def work(conn: Any, head: Head, at: str, staged: _Staged) -> tuple[list[Entry], Head]:
            for pair in claims:
                if pair in staged.claims or conn.execute(sql.claim_exists(D), pair).fetchone():
                    raise LedgerConflict(*pair)
            first = head[0] + 1
            entry_rows, entries, head = chain(head, at, batch)
            bodies = [(seq, digest, body.encode("utf-8"), at) for seq, digest, body in
                      content_rows(first, entries, contents)] if contents else []
            staged.claims.update(claims)
            staged.entries.extend(entry_rows)
            staged.bodies.extend(bodies)
            staged.inserts.extend(inserts)
            return entries, head

        return work

    def _submit(self, work: Work, *, alone: bool = False) -> concurrent.futures.Future[Any]:
        if self.read_only:
            raise LedgerError(f"ledger {_safe(self.url)} is open read-only: nothing was written")
        return self._writer.submit(work, alone=alone)

    def _notify(self, last: int, turns: set[str | None]) -> None:
        self.appended.notify(last, turns)

    async def claimed(self, kind: str, claim: str) -> Entry | None:
        row = await self._aread(
            lambda c: c.execute(sql.claim_exists(D), (kind, claim)).fetchone())
        return row_to_entry(row) if row else None

    async def prune(self, cutoff: str) -> LedgerPruned:
        """Remove entries and content older than ``cutoff`` (see :mod:`.retention`)."""
        record: LedgerPruned = await asyncio.wrap_future(
            self._submit(_prune_work(cutoff), alone=True))
        return record

    def prune_sync(self, cutoff: str) -> LedgerPruned:
        record: LedgerPruned = self._submit(_prune_work(cutoff), alone=True).result()
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
        return await asyncio.wrap_future(self._read_future(self._read, work))

    def _read_future(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """``fn(*args)`` on one of the ledger's reader threads."""
        if self._closed or self._readers is None:
            raise LedgerClosed(f"ledger {_safe(self.url)} is closed")
        try:
            return self._readers.submit(fn, *args)
        except RuntimeError as exc:  # shut down by a close meanwhile
            raise LedgerClosed(f"ledger {_safe(self.url)} is closed") from exc

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
        return await asyncio.wrap_future(self._read_future(
            self._verify, check_content, check_index, check_bodies, progress))

    def verify_sync(self, *, check_content: bool = True, check_index: bool = True,
                    check_bodies: bool = True, progress: Progress | None = None
                    ) -> VerifyReport:
        """:meth:`verify`, for callers without an event loop (see :func:`.pg_read.verify`)."""
        if self._closed:
            raise LedgerClosed(f"ledger {_safe(self.url)} is closed")
        return self._verify(check_content, check_index, check_bodies, progress)

    def _verify(self, check_content: bool, check_index: bool, check_bodies: bool,
                progress: Progress | None) -> VerifyReport:
        try:
            with self._connect() as conn:
                return pg_read.verify(conn, check_content, check_index, check_bodies, progress)
        except psycopg.Error as exc:
            raise LedgerError(f"cannot read ledger {_safe(self.url)}: {exc}") from exc

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
        if self._readers is not None:
            self._readers.shutdown(wait=True)
        if self._pool is not None:
            self._pool.close()
        logging.getLogger(POOL_LOGGER).removeFilter(self._pool_filter)


class _Store:
    """PostgreSQL's part of the writer (:class:`overt.ledger.groups.Store`): a group
    is one transaction, begun with the chain lock and the head in one round trip;
    its batches stage their rows, written by ``COPY`` when it commits."""

    def __init__(self, ledger: PostgresLedger) -> None:
        self._ledger = ledger
        self._staged = _Staged()
        self._ended = False  # a batch alone failed: its transaction is rolled back

    def connect(self) -> Any:
        return self._ledger._connect(autocommit=True)

    def begin(self, conn: Any) -> Head:
        self._staged, self._ended = _Staged(), False
        cur = conn.execute(_BEGIN_LOCK_HEAD)
        cur.nextset()
        cur.nextset()
        row = cur.fetchone()
        return (int(row[0]), row[1]) if row else (0, GENESIS)

    def stage(self, conn: Any, work: Work, head: Head, at: str,
              alone: bool) -> tuple[Any, Head]:
        try:
            return work(conn, head, at, self._staged)
        except psycopg.Error as exc:  # the transaction is aborted: the group's failure
            raise Broken(str(exc)) from exc
        except Exception:
            if alone:  # the batch is the transaction (a prune may have written): undone
                try:
                    self.rollback(conn)
                except psycopg.Error as exc:
                    raise Broken(str(exc)) from exc
                self._ended = True
            raise

    def commit(self, conn: Any) -> None:
        if self._ended:
            return
        staged, self._staged = self._staged, _Staged()
        with conn.cursor() as cur:
            for statement, rows in ((_COPY_CONTENT, staged.bodies),
                                    (_COPY_ENTRIES, staged.entries)):
                if rows:
                    with cur.copy(statement) as copy:
                        for row in rows:
                            copy.write_row(row)
            for statement, values in staged.inserts:
                cur.execute(statement, values)
        conn.execute("COMMIT")
        self._ledger.outage.answered()

    def rollback(self, conn: Any) -> None:
        self._staged = _Staged()
        if not conn.closed:
            conn.execute("ROLLBACK")

    def close(self, conn: Any) -> None:
        conn.close()

    def refused(self, exc: Exception) -> bool:
        return isinstance(exc, (psycopg.DataError, psycopg.IntegrityError,
                                psycopg.ProgrammingError))

    def stale(self, exc: Exception) -> bool:
        return isinstance(exc, psycopg.OperationalError)

    def failure(self, exc: Exception) -> LedgerError:
        if isinstance(exc, psycopg.Error):
            return self._ledger._failure("append", "append to", exc)
        return LedgerError(f"cannot append to ledger {_safe(self._ledger.url)}: "
                           f"{type(exc).__name__}: {exc}")


def _prune_work(cutoff: str) -> Work:
    """A prune, in a group of its own: the record sealing the range is the head when
    the owner's ``overt_prune`` (SECURITY DEFINER) deletes through it, and nothing
    else can delete."""
    def work(conn: Any, head: Head, at: str, staged: _Staged) -> tuple[LedgerPruned, Head]:
        record = retention.plan(lambda q, p: conn.execute(q, p).fetchone(), D, cutoff, head[0])
        rows, _, head = chain(head, at, drafts([record]))
        conn.execute(sql.insert_entries(D), rows[0])
        if record.removed_entries:
            tree.store_prune_rows(conn, D, record.through_seq)  # the tree's stand-ins for them
            retention.carry_bodies(conn, D, record.through_seq)  # bodies kept entries name
            conn.execute("SELECT overt_prune(%s)", (record.through_seq,))
        return record, head

    return work
