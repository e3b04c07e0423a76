"""The ledger on a SQL database, written once over a small :class:`Backend`.

SQLite and PostgreSQL hold the same tables (the chain, its content tier, the
trail index and the tables beside them), and :mod:`overt.ledger.sql` spells each
query for either. :class:`SqlLedger` is the one implementation of the
:class:`~overt.ledger.base.Ledger` over them; a backend says only how it
connects, reads on threads of its own, takes the chain's write lock, writes a
group's rows, deletes a pruned range, and what its errors mean.

Appends go through the ledger's writer thread (:mod:`overt.ledger.groups`): each
batch of a group checks its once-only claims and stages its rows, and the backend
writes the group's rows when it commits (``executemany`` on SQLite, ``COPY`` on
PostgreSQL). A group whose rows the database refuses is committed again one batch
at a time, so one bad batch fails alone. A prune is a group of its own.

Reads run on the backend's threads (never the event loop's default executor,
which the local model and sync tools share). ``verify`` reads the chain in one
snapshot and builds each entry's hash preimage in Python
(:func:`~overt.ledger.chain.verify_rows`), the one place it is built.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from overt.clock import now_iso
from overt.errors import LedgerClosed, LedgerConflict, LedgerError
from overt.events import Event, LedgerPruned
from overt.ledger import memory_check, request_parts, retention, sql, trail_index, trail_read, tree
from overt.ledger.base import Entry, TableRow, TrailRows, TurnSummary, UsageRow, VerifyReport
from overt.ledger.canonical import GENESIS
from overt.ledger.chain import (
    Counted,
    Progress,
    Row,
    batch_claims,
    began_pruned_on,
    chain,
    checked_body,
    content_checked,
    content_rows,
    drafts,
    row_to_entry,
    turn_summary,
    verify_rows,
    with_body_check,
)
from overt.ledger.groups import Broken, Head, Writer
from overt.ledger.notify import AppendSignal
from overt.ledger.sql import Dialect

T = TypeVar("T")


@dataclass(slots=True)
class Staged:
    """What a group's batches stage, written by :meth:`Backend.write` at its commit."""

    at: str = ""
    """The group's time (the content rows' ``created_at``)."""
    entries: list[Row] = field(default_factory=list)
    bodies: list[tuple[int, str, str]] = field(default_factory=list)
    """(seq, digest, body) of each body (:func:`~overt.ledger.chain.content_rows`)."""
    index: list[tuple[str, list[Any]]] = field(default_factory=list)
    """Trail-index inserts and their rows, where the writer writes them
    (:meth:`Backend.index_rows`)."""
    inserts: list[tuple[str, Sequence[Any]]] = field(default_factory=list)
    """Rows beside the chain (:func:`~overt.ledger.sql.insert_row`) and their values."""
    claims: set[tuple[str, str]] = field(default_factory=set)


Work = Callable[[Any, Head, str, Staged], tuple[Any, Head]]
"""A batch's part of a group transaction: given the connection, the head, the
group's time and what the group has staged so far, it checks its claims and stages
its rows (changing nothing staged when it fails), or writes them itself (a prune,
alone in its group); it returns its result and the new head."""


class Backend(Protocol):
    """What a database gives :class:`SqlLedger`."""

    name: str
    """``sqlite`` or ``postgres``: the ledger's :attr:`SqlLedger.backend`."""
    dialect: Dialect
    """How the queries are spelled (the placeholder style, JSON fields)."""
    url: str
    """The ledger's file or URL, as it was opened."""
    where: str
    """The ledger as messages name it (``ledger PATH``, a URL without its password)."""
    read_only: bool

    @property
    def executor(self) -> concurrent.futures.Executor:
        """The threads reads run on, the ledger's own."""
        ...

    errors: tuple[type[Exception], ...]
    """The driver's errors."""

    def read(self, work: Callable[[Any], T]) -> T:
        """``work`` on a read connection, on the calling thread (one of
        :attr:`executor`'s).

        Raises:
            LedgerError: the database failed the read (:meth:`error`).
        """
        ...

    def snapshot(self, conn: Any, *, text: bool = False) -> AbstractContextManager[Any]:
        """One read-only transaction on ``conn``: every read inside sees one snapshot.
        Yields what to run the reads on: ``conn``, or with ``text`` one that reads
        content bodies as text."""
        ...

    def stream(self, conn: Any, statement: str) -> Iterable[Sequence[Any]]:
        """The rows of a long read inside :meth:`snapshot`, fetched as they are used."""
        ...

    def body_digest(self, body: Any) -> str:
        """The digest of a content body as :meth:`stream` reads it (a body of a type
        overt never stores: a digest that matches nothing)."""
        ...

    def index_rows(self, entries: Sequence[Entry],
                   body_seqs: dict[str, int]) -> list[tuple[str, list[Any]]]:
        """The trail-index inserts of a batch's entries, where the writer writes them
        (empty where the database derives them)."""
        ...

    def connect(self) -> Any:
        """A new connection for the writer."""
        ...

    def begin(self, conn: Any) -> Head:
        """Begin a write transaction holding the chain's lock; the head."""
        ...

    def write(self, conn: Any, staged: Staged) -> None:
        """Write a group's staged rows, in the transaction :meth:`begin` began."""
        ...

    def commit(self, conn: Any) -> None:
        ...

    def rollback(self, conn: Any) -> None:
        """Abandon the transaction, if one is open."""
        ...

    def delete_through(self, conn: Any, through: int) -> None:
        """Delete the entries, bodies and trail-index rows through ``seq = through``,
        inside the prune's transaction that sealed them."""
        ...

    def refused(self, exc: Exception) -> bool:
        """Whether ``exc`` is the database refusing a group's rows (its data)."""
        ...

    def stale(self, exc: Exception) -> bool:
        """Whether ``exc``, beginning on a kept connection, says it died meanwhile."""
        ...

    def error(self, verb: str, exc: Exception) -> LedgerError:
        """The error for a driver's ``exc`` failing a ``verb`` (``read``, ``append to``)."""
        ...

    def migrate(self) -> list[int]:
        """Apply pending migrations; the versions applied."""
        ...

    def close(self) -> None:
        """Release the read connections and threads."""
        ...


class SqlLedger:
    """A ledger on the database of ``db``. Opened by a backend's ``open``
    (:meth:`overt.ledger.sqlite.SqliteLedger.open`,
    :meth:`overt.ledger.postgres.PostgresLedger.open`); close with :meth:`close`.

    ``conn``: the writer's first connection (else its first group opens one).
    ``clock``: the time entries are stamped with.
    """

    def __init__(self, db: Backend, *, conn: Any = None,
                 clock: Callable[[], str] = now_iso) -> None:
        self._db = db
        self.backend = db.name
        self.url = db.url
        self.dialect = db.dialect
        self.read_only = db.read_only
        """Opened read-only: every write is refused (:class:`LedgerError`), nothing written."""
        self.appended = AppendSignal()
        """Signalled after each append of this process (readers that follow the ledger)."""
        self._closed = False
        self._writer: Writer[Any, Work] = Writer(
            _Store(db), db.where, thread_name=f"overt-ledger-writer:{db.name}",
            notify=self._notify, conn=conn, clock=clock)
        if not db.read_only:
            self._writer.start()

    # -- schema -------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations (idempotent; safe when processes start at once);
        the versions applied (empty: up to date).

        Raises:
            MigrationError: a migration failed; nothing of it was applied.
        """
        if self.read_only:
            raise LedgerError(f"{self._db.where} is open read-only: not migrated")
        return self._db.migrate()

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

        A batch whose claim is taken (on the record, or earlier in the group)
        stages nothing and fails with the conflict.

        Raises:
            LedgerError: the data is not canonical JSON, or a table is not plain.
            LedgerConflict: the batch claims one (kind, claim) twice.
        """
        d, db = self.dialect, self._db
        try:
            batch = drafts(events)
            inserts = [(sql.insert_row(d, table, list(values)), tuple(values.values()))
                       for table, values in rows]
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"event data is not canonical JSON: {exc}") from exc
        claims = batch_claims(batch)

        def work(conn: Any, head: Head, at: str, staged: Staged) -> tuple[list[Entry], Head]:
            for pair in claims:
                if pair in staged.claims or conn.execute(sql.claim_exists(d), pair).fetchone():
                    raise LedgerConflict(*pair)
            first = head[0] + 1
            entry_rows, entries, head = chain(head, at, batch)
            bodies = content_rows(first, entries, contents) if contents else []
            index = db.index_rows(entries, {digest: seq for seq, digest, _ in bodies})
            staged.at = at
            staged.claims.update(claims)
            staged.entries.extend(entry_rows)
            staged.bodies.extend(bodies)
            staged.index.extend(index)
            staged.inserts.extend(inserts)
            return entries, head

        return work

    def _notify(self, last: int, turns: set[str | None]) -> None:
        self.appended.notify(last, turns)

    def _submit(self, work: Work, *, alone: bool = False) -> concurrent.futures.Future[Any]:
        if self.read_only:
            raise LedgerError(f"{self._db.where} is open read-only: nothing was written")
        return self._writer.submit(work, alone=alone)

    async def prune(self, cutoff: str) -> LedgerPruned:
        """Remove entries and content older than ``cutoff`` (see :mod:`.retention`)."""
        found = await self._aread(self._search_carry(cutoff))
        record: LedgerPruned = await asyncio.wrap_future(
            self._submit(self._prune_work(cutoff, found), alone=True))
        return record

    def prune_sync(self, cutoff: str) -> LedgerPruned:
        found = self._read_future(self._search_carry(cutoff)).result()
        record: LedgerPruned = self._submit(self._prune_work(cutoff, found),
                                            alone=True).result()
        return record

    def _search_carry(self, cutoff: str) -> Callable[[Any], request_parts.Carry | None]:
        """What a prune to ``cutoff`` must store again, found in a read snapshot while
        appends go on (:func:`.retention.search_carry`)."""
        d, db = self.dialect, self._db

        def work(conn: Any) -> request_parts.Carry | None:
            with db.snapshot(conn):
                return retention.search_carry(conn, d, cutoff,
                                              functools.partial(db.stream, conn))
        return work

    def _prune_work(self, cutoff: str, found: request_parts.Carry | None = None) -> Work:
        """A prune, in a group of its own: the record sealing the range is written
        first, so it is the head when the range is deleted; then the tree's stand-ins
        for the removed entries, the bodies kept entries still name (``found``: those
        of the requests a search before the lock reached), and the delete."""
        d, db = self.dialect, self._db

        def work(conn: Any, head: Head, at: str, staged: Staged) -> tuple[LedgerPruned, Head]:
            record = retention.plan(lambda q, p: conn.execute(q, p).fetchone(), d, cutoff,
                                    head[0])
            rows, _, head = chain(head, at, drafts([record]))
            conn.execute(sql.insert_entries(d), rows[0])
            if record.removed_entries:
                tree.store_prune_rows(conn, d, record.through_seq)
                retention.carry_bodies(conn, d, record.through_seq,
                                        functools.partial(db.stream, conn), found)
                db.delete_through(conn, record.through_seq)
            return record, head

        return work

    async def claimed(self, kind: str, claim: str) -> Entry | None:
        rows = await self._aquery(sql.claim_exists(self.dialect), (kind, claim))
        return row_to_entry(rows[0]) if rows else None

    # -- reading ------------------------------------------------------------

    def _read_future(self, work: Callable[[Any], T]) -> concurrent.futures.Future[T]:
        """``work`` on a read connection, on one of the ledger's reader threads."""
        if self._closed:
            raise LedgerClosed(f"{self._db.where} is closed")
        try:
            return self._db.executor.submit(self._db.read, work)
        except RuntimeError as exc:  # shut down by a close meanwhile
            raise LedgerClosed(f"{self._db.where} is closed") from exc

    async def _aread(self, work: Callable[[Any], T]) -> T:
        return await asyncio.wrap_future(self._read_future(work))

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """A query's rows (for callers without an event loop)."""
        rows: list[Any] = self._read_future(
            lambda c: c.execute(statement, params).fetchall()).result()
        return rows

    async def _aquery(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        rows: list[Any] = await self._aread(lambda c: c.execute(statement, params).fetchall())
        return rows

    async def select(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of a query on the tables beside the chain (memory reads them so)."""
        return await self._aquery(statement, params)

    async def entries(self, *, turn_id: str | None = None, session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None, limit: int | None = None) -> list[Entry]:
        statement, params = sql.select_entries(self.dialect, turn_id=turn_id,
                                               session_id=session_id, kinds=kinds,
                                               since=since, until=until, limit=limit)
        return [row_to_entry(r) for r in await self._aquery(statement, params)]

    async def trail_rows(self, *, turn_id: str | None = None,
                         session_id: str | None = None, since: str | None = None,
                         until: str | None = None) -> TrailRows:
        reads = trail_read.statements(self.dialect, turn_id=turn_id, session_id=session_id,
                                      since=since, until=until)

        def read(conn: Any) -> TrailRows:
            with self._db.snapshot(conn, text=True) as cur:
                return trail_read.read(cur, reads)

        return await self._aread(read)

    async def content(self, digest: str, *, seq: int | None = None) -> str | None:
        params: tuple[Any, ...] = (digest,) if seq is None else (seq, digest)
        rows = await self._aquery(sql.select_content(self.dialect, near_seq=seq is not None),
                                  params)
        return checked_body(digest, (r[0] for r in rows))

    async def recent_turns(self, limit: int = 20) -> list[TurnSummary]:
        rows = await self._aquery(sql.recent_turns(self.dialect), (int(limit),))
        return [turn_summary(r) for r in rows]

    async def usage(self, since: str | None = None, until: str | None = None,
                    by: Sequence[str] = ("route", "model")) -> list[UsageRow]:
        rows = await self._aquery(sql.usage(self.dialect, by), (since or "", until or "\uffff"))
        return [UsageRow(r[0], r[1], int(r[4]), int(r[5]), int(r[6]), round(float(r[7]), 10),
                         r[2], r[3]) for r in rows]

    async def spent(self, *, since: str, session_id: str | None = None) -> tuple[int, float]:
        params = (since,) if session_id is None else (since, session_id)
        statement = sql.spent(self.dialect, session=session_id is not None)
        row = (await self._aquery(statement, params))[0]
        return int(row[0]), round(float(row[1]), 10)

    async def count(self, kind: str, since: str | None = None) -> int:
        return int((await self._aquery(sql.count(self.dialect, kind),
                                       (kind, since or "")))[0][0])

    async def reply_failures(self, reply_claim: str) -> int:
        return int((await self._aquery(sql.reply_failures(self.dialect), (reply_claim,)))[0][0])

    async def direct_calls(self, tool_call_ids: Sequence[str]) -> list[Entry]:
        rows = [r for ids in sql.chunks(tool_call_ids)
                for r in await self._aquery(sql.direct_calls(self.dialect, len(ids)), ids)]
        return sorted(map(row_to_entry, rows), key=lambda e: e.seq)

    async def unresumed_replies(self) -> list[Entry]:
        return [row_to_entry(r) for r in await self._aquery(sql.unresumed_replies(self.dialect))]

    async def last_error(self) -> Entry | None:
        rows = await self._aquery(sql.last_error(self.dialect))
        return row_to_entry(rows[0]) if rows else None

    # -- verification -------------------------------------------------------

    async def verify(self, *, check_content: bool = True, check_index: bool = True,
                     check_bodies: bool = True, progress: Progress | None = None
                     ) -> VerifyReport:
        return await self._aread(lambda c: self._verify(c, check_content, check_index,
                                                        check_bodies, progress))

    def verify_sync(self, *, check_content: bool = True, check_index: bool = True,
                    check_bodies: bool = True, progress: Progress | None = None
                    ) -> VerifyReport:
        """:meth:`verify`, for callers without an event loop."""
        return self._read_future(lambda c: self._verify(c, check_content, check_index,
                                                        check_bodies, progress)).result()

    def _verify(self, conn: Any, check_content: bool, check_index: bool, check_bodies: bool,
                progress: Progress | None) -> VerifyReport:
        """Verify in one read-only snapshot, whatever the writer does meanwhile."""
        d, db = self.dialect, self._db
        with db.snapshot(conn):
            counted = Counted.of(conn, progress, check_index, check_content, check_bodies)
            anchors = {int(s): h for s, h in conn.execute(sql.prune_anchors(d)).fetchall()
                       if s is not None and h is not None}
            report = verify_rows(counted.rows(db.stream(conn, sql.VERIFY)), anchors)
            if check_index and report.ok:
                report = trail_index.verified(report, conn, sql.trail_index_check(d), anchors,
                                              counted.rows)
                report = memory_check.verified(report, conn, d)
            if not check_content or not report.ok:
                return report
            walk = request_parts.verify_walk(conn, d, bool(anchors)) if check_bodies else None
            report, present = content_checked(
                report, request_parts.verify_rows(
                    counted.rows(db.stream(conn, request_parts.newest_first(d))), walk),
                db.body_digest)
            if not check_bodies or walk is None:
                return report
            report = with_body_check(report,
                                     counted.rows(db.stream(conn, sql.body_pointers(d))),
                                     present, pruned=bool(anchors),
                                     began_pruned=began_pruned_on(conn, d.ph))
            return request_parts.with_parts_check(report, walk, present,
                                                  request_parts.reader(conn, d))

    # -- closing ------------------------------------------------------------

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
        self._db.close()


def head_of(row: Sequence[Any] | None) -> Head:
    """The head from the row of :data:`~overt.ledger.sql.HEAD` (none: the empty chain)."""
    return (int(row[0]), row[1]) if row else (0, GENESIS)


class _Store:
    """The writer's part of a :class:`Backend` (:class:`overt.ledger.groups.Store`): a
    group is one transaction, begun with the chain's lock and the head; its batches
    stage their rows, which the backend writes when it commits."""

    def __init__(self, db: Backend) -> None:
        self._db = db
        self._staged = Staged()
        self._ended = False  # a batch alone failed: its transaction is rolled back

    def connect(self) -> Any:
        return self._db.connect()

    def begin(self, conn: Any) -> Head:
        self._staged, self._ended = Staged(), False
        return self._db.begin(conn)

    def stage(self, conn: Any, work: Work, head: Head, at: str,
              alone: bool) -> tuple[Any, Head]:
        try:
            return work(conn, head, at, self._staged)
        except self._db.errors as exc:  # the transaction may be unusable: the group's failure
            raise Broken(str(exc)) from exc
        except Exception:
            if alone:  # the batch is the transaction (a prune may have written): undone
                try:
                    self._db.rollback(conn)
                except self._db.errors as exc:
                    raise Broken(str(exc)) from exc
                self._ended = True
            raise

    def commit(self, conn: Any) -> None:
        if self._ended:
            return
        staged, self._staged = self._staged, Staged()
        self._db.write(conn, staged)
        self._db.commit(conn)

    def rollback(self, conn: Any) -> None:
        self._staged = Staged()
        self._db.rollback(conn)

    def close(self, conn: Any) -> None:
        conn.close()

    def refused(self, exc: Exception) -> bool:
        return self._db.refused(exc)

    def stale(self, exc: Exception) -> bool:
        return self._db.stale(exc)

    def failure(self, exc: Exception) -> LedgerError:
        if isinstance(exc, self._db.errors):
            return self._db.error("append to", exc)
        return LedgerError(f"cannot append to {self._db.where}: {type(exc).__name__}: {exc}")
