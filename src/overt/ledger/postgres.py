"""The ledger in PostgreSQL: many overt processes on many hosts share one chain.

:class:`PostgresLedger` is the :class:`~overt.ledger.sql_ledger.SqlLedger` on a
:class:`PostgresBackend`. The chain contract (:mod:`overt.ledger.canonical`) is
SQLite's: one gapless ``seq`` over every process, so ``verify`` catches a changed,
deleted, inserted or reordered entry anywhere. Appends are serialized by a
transaction-scoped advisory lock taken before the head is read, in the same round
trip; the commit releases it, so two writers can never chain onto the same head.
Each process commits in groups (serializing commits would cap a ledger at one
fsync per commit for all workers together), a group's rows written by ``COPY``;
the trail index is the owner's trigger's to write, and a prune deletes through the
owner's ``overt_prune`` (:mod:`overt.ledger.schema.derived`).

Reads run on threads of the ledger's own, as many as its pool has connections
(never the event loop's default executor, which the local model and sync tools
share); a long read (a trail, ``verify``) is one ``REPEATABLE READ`` snapshot.

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

import concurrent.futures
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

from overt.errors import ExtraMissingError, LedgerError, LedgerUnavailable
from overt.ledger import pg_migrate
from overt.ledger.base import Entry
from overt.ledger.canonical import digest_bytes
from overt.ledger.chain import ENTRY_COLUMNS, body_text
from overt.ledger.groups import Head
from overt.ledger.outage import POOL_LOGGER, Outage
from overt.ledger.pg_url import libpq_options, parse_url, url_pool_size
from overt.ledger.pg_url import safe_url as _safe
from overt.ledger.sql import POSTGRES
from overt.ledger.sql_ledger import SqlLedger, Staged, head_of

try:
    import psycopg
    import psycopg_pool
    from psycopg.abc import Buffer
    from psycopg.adapt import Loader
    from psycopg.pq import Format
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
SNAPSHOT_WORK_MEM = "64MB"
"""The sort memory of one long read (a whole session's trail), for its transaction
alone: a long session's steps with their text outgrow the default (4 MB), which
then sorts on disk."""
STREAM_ROWS = 10_000
"""How many rows a long read's server-side cursor fetches at a time."""

# Round trip 1 of an append: the chain lock, then the head it guards.
_BEGIN_LOCK_HEAD = (f"BEGIN; SELECT pg_advisory_xact_lock({CHAIN_LOCK}); "
                    "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
# Then every content body and entry of the group, by COPY (the cheapest path
# per row for client and server), and the commit.
_COPY_CONTENT = "COPY content_blobs (seq, digest, body, created_at) FROM STDIN"
_COPY_ENTRIES = f"COPY audit_log ({ENTRY_COLUMNS}) FROM STDIN"
_cursor_names = itertools.count()


class PostgresLedger(SqlLedger):
    """A ledger in one PostgreSQL schema. Open with :meth:`open`; close with :meth:`close`."""

    _db: PostgresBackend

    @property
    def schema(self) -> str:
        return self._db.schema

    @property
    def outage(self) -> Outage:
        """The server out of reach: logged in proportion (:mod:`overt.ledger.outage`)."""
        return self._db.outage

    @property
    def read_wait_s(self) -> float:
        """How long a read waits for a connection (the server down: then LedgerError)."""
        return self._db.read_wait_s

    @read_wait_s.setter
    def read_wait_s(self, seconds: float) -> None:
        self._db.read_wait_s = seconds

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
        db = PostgresBackend(url, conninfo, schema, pool_size or url_pool_size(url),
                             read_only=read_only)
        db.open(migrate=migrate, create=create)
        return cls(db)


if psycopg is not None:
    class _Utf8Body(Loader):
        """A body (bytea) as the text it holds. PostgreSQL's ``convert_from`` refuses a
        body holding NUL, which text cannot hold and Python's can."""

        format = Format.BINARY

        def load(self, data: Buffer) -> str | None:
            return body_text(data)


class PostgresBackend:
    """PostgreSQL's part of a :class:`~overt.ledger.sql_ledger.SqlLedger`
    (:class:`~overt.ledger.sql_ledger.Backend`)."""

    name = "postgres"
    dialect = POSTGRES

    def __init__(self, url: str, conninfo: str, schema: str, pool_size: int, *,
                 read_only: bool) -> None:
        self.url = url
        self.where = f"ledger {_safe(url)}"
        self.schema = schema
        self.read_only = read_only
        """The server refuses any write on its connections too
        (``default_transaction_read_only``)."""
        self.errors: tuple[type[Exception], ...] = (psycopg.Error,)
        self.read_wait_s = READ_WAIT_S
        self.outage = Outage(self.where, log)
        self.executor = concurrent.futures.ThreadPoolExecutor(
            pool_size, thread_name_prefix=f"overt-ledger-reader:{schema}")
        self._pool_size = pool_size
        self._conninfo = conninfo
        self._options = " ".join(filter(None, (
            libpq_options(conninfo), f"-c search_path={schema}",
            "-c default_transaction_read_only=on" if read_only else "")))
        self._pool: Any = None
        self._pool_name = f"overt-{schema}-{id(self):x}"
        self._pool_filter = self.outage.pool_filter(self._pool_name)

    def open(self, *, migrate: bool, create: bool) -> None:
        """Check (read only), create or migrate the schema; open the read pool.

        Raises:
            LedgerError: the server cannot be reached; ``create`` false: no ledger.
            MigrationError: the schema could not be migrated.
        """
        try:
            if self.read_only or not (migrate or create):
                with self._connect(autocommit=True) as conn:
                    if not create:
                        pg_migrate.refuse_absent(conn, self.schema, self.url)
                    if self.read_only:
                        pg_migrate.refuse_stale(conn, self.url)
            elif migrate:
                pg_migrate.migrate(self._conninfo, self.schema, self.url, create=create)
            logging.getLogger(POOL_LOGGER).addFilter(self._pool_filter)
            self._pool = psycopg_pool.ConnectionPool(
                self._conninfo, min_size=1, max_size=self._pool_size, open=True,
                name=self._pool_name, reconnect_timeout=RECONNECT_S,
                kwargs={"options": self._options, "autocommit": True})
        except BaseException as exc:
            self.close()
            if isinstance(exc, psycopg.Error):
                raise LedgerError(f"cannot open {self.where}: {exc}") from exc
            raise

    def _connect(self, *, autocommit: bool = False) -> Any:
        return psycopg.connect(self._conninfo, options=self._options, autocommit=autocommit)

    # -- reading --------------------------------------------------------------

    def read(self, work: Callable[[Any], T]) -> T:
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
                log.warning("%s: a read connection was lost; reading again", self.where)
                self._pool.check()
                with self._connection() as conn:
                    result = work(conn)
        except psycopg.Error as exc:
            raise self.error("read", exc) from exc
        self.outage.answered()
        return result

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

    @contextmanager
    def snapshot(self, conn: Any, *, text: bool = False) -> Iterator[Any]:
        """A ``REPEATABLE READ`` read-only transaction on ``conn`` (a pooled one, in
        autocommit); ``text``: yields a cursor that reads bytea bodies as text."""
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            conn.execute(f"SET LOCAL work_mem = '{SNAPSHOT_WORK_MEM}'")
            if not text:
                yield conn
                return
            with conn.cursor(binary=True) as cur:
                cur.adapters.register_loader("bytea", _Utf8Body)  # this cursor's alone
                yield cur

    def stream(self, conn: Any, statement: str) -> Iterator[Any]:
        """A server-side cursor's rows, in binary (a body as its bytes)."""
        with conn.cursor(name=f"overt_read_{next(_cursor_names)}", binary=True) as cur:
            cur.itersize = STREAM_ROWS
            cur.execute(statement)
            yield from cur

    def body_digest(self, body: Any) -> str:
        return digest_bytes(bytes(body))

    def index_rows(self, entries: Sequence[Entry],
                   body_seqs: dict[str, int]) -> list[tuple[str, list[Any]]]:
        return []  # the owner's trigger derives them from the entries (schema.derived)

    # -- writing --------------------------------------------------------------

    def connect(self) -> Any:
        return self._connect(autocommit=True)

    def begin(self, conn: Any) -> Head:
        cur = conn.execute(_BEGIN_LOCK_HEAD)
        cur.nextset()
        cur.nextset()
        return head_of(cur.fetchone())

    def write(self, conn: Any, staged: Staged) -> None:
        bodies = [(seq, digest, body.encode("utf-8"), staged.at)
                  for seq, digest, body in staged.bodies]
        with conn.cursor() as cur:
            for statement, rows in ((_COPY_CONTENT, bodies), (_COPY_ENTRIES, staged.entries)):
                if rows:
                    with cur.copy(statement) as copy:
                        for row in rows:
                            copy.write_row(row)
            for statement, values in staged.inserts:
                cur.execute(statement, values)

    def commit(self, conn: Any) -> None:
        conn.execute("COMMIT")
        self.outage.answered()

    def rollback(self, conn: Any) -> None:
        if not conn.closed:
            conn.execute("ROLLBACK")

    def delete_through(self, conn: Any, through: int) -> None:
        conn.execute("SELECT overt_prune(%s)", (through,))  # the owner's SECURITY DEFINER

    def refused(self, exc: Exception) -> bool:
        return isinstance(exc, (psycopg.DataError, psycopg.IntegrityError,
                                psycopg.ProgrammingError))

    def stale(self, exc: Exception) -> bool:
        return isinstance(exc, psycopg.OperationalError)

    def error(self, verb: str, exc: Exception) -> LedgerError:
        """The server out of reach is :class:`LedgerUnavailable`, counted in
        :attr:`outage`.

        A statement the server cancelled (its ``statement_timeout`` or ``lock_timeout``,
        an operator's ``pg_cancel_backend``) is an ``OperationalError`` too, but the
        server answered: a :class:`LedgerError` that says so, not an outage.
        """
        message = f"cannot {verb} {self.where}: {exc}"
        if isinstance(exc, (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable)):
            self.outage.answered()
            return LedgerError(f"{message} (the server cancelled the statement: its "
                               "statement_timeout or lock_timeout, or an operator)")
        if not isinstance(exc, psycopg.OperationalError):  # a pool timeout is one too
            return LedgerError(message)
        self.outage.failed(verb.split()[0], exc)
        return LedgerUnavailable(message)

    # -- the schema, and closing ----------------------------------------------

    def migrate(self) -> list[int]:
        return pg_migrate.migrate(self._conninfo, self.schema, self.url)

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        if self._pool is not None:
            self._pool.close()
        logging.getLogger(POOL_LOGGER).removeFilter(self._pool_filter)
