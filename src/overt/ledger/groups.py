"""The ledger's writer: one thread per ledger commits every append, in groups.

Both backends write through :class:`Writer`. :meth:`Writer.submit` queues a
batch and returns a future; the writer's thread takes every batch waiting (up to
a limit), begins one transaction under the chain's write lock, reads the head
there (another process may have moved it), stages each batch, commits, and only
then answers each caller. A turn never acts before its records are committed;
concurrent turns share the commit. What differs between the backends (how they
connect, lock, stage and commit) is a :class:`Store`.

The failure rules, the same on both backends:

- **A batch's own failure** (its claim is taken, the writer cannot store one of
  its values) fails that batch alone, with its error; the others of its group
  commit. A group whose rows the database refuses as a whole is committed again
  one batch at a time, so the bad one fails alone.
- **A group's failure** (the connection lost, the server out of reach, the disk
  full, the write lock not had in time) fails every batch of the group with a
  :class:`~overt.errors.LedgerError` that says why; the writer drops its
  connection and opens a new one for the next group.
- **The writer dies** when anything else escapes it (a bug, an error outside
  any transaction): every batch it held or that is queued, and every later
  call, fails with a :class:`~overt.errors.LedgerError` naming the cause. Reads
  go on; opening the ledger again starts a new writer.
- **Closing** answers every batch still queued, not yet taken by the writer,
  with :class:`~overt.errors.LedgerClosed`; the group the writer holds is
  committed (or fails) and answered; then the thread stops. Every call after
  that raises :class:`~overt.errors.LedgerClosed`.

:meth:`Writer.submit` and :meth:`Writer.close` hold one lock, so a batch is either
queued before closing drains the queue (and answered) or refused; the writer's
state (closed, dead, its thread gone) is checked on each submit.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from overt.clock import now_iso
from overt.errors import LedgerClosed, LedgerConflict, LedgerError
from overt.ledger.base import Entry

log = logging.getLogger("overt.ledger.writer")

P = TypeVar("P")
C = TypeVar("C")
W = TypeVar("W")
W_contra = TypeVar("W_contra", contravariant=True)
Head = tuple[int, str]
"""The chain's head: (seq, hash) of its last entry ((0, GENESIS) when empty)."""

MAX_BATCH = 512
"""The most batches one group commits."""
CLOSE_WAIT_S = 60.0
"""How long closing waits for the group the writer holds (a server that does not
answer): then the ledger is closed anyway, and the writer answers that group when
its transaction ends."""


class Broken(Exception):
    """Raised by :meth:`Store.stage` when the transaction itself failed, not the
    batch's own part: the whole group fails (``__cause__`` says why)."""


class Store(Protocol[C, W_contra]):
    """A backend's part of writing: its connection ``C`` and its batches ``W``."""

    def connect(self) -> C:
        """A new connection for the writer."""
        ...

    def begin(self, conn: C) -> Head:
        """Begin a group's transaction holding the chain's write lock; the head."""
        ...

    def stage(self, conn: C, work: W_contra, head: Head, at: str,
              alone: bool) -> tuple[Any, Head]:
        """Store (or stage, to be written by :meth:`commit`) one batch after ``head``,
        at the group's time ``at``; its result and the new head. ``alone``: the only
        batch of its group.

        Raises:
            Broken: the transaction failed: the group fails.
            Exception: anything else: this batch alone fails, its part undone.
        """
        ...

    def commit(self, conn: C) -> None:
        """Write what is staged and commit."""
        ...

    def rollback(self, conn: C) -> None:
        """Abandon the transaction, if one is open."""
        ...

    def close(self, conn: C) -> None:
        ...

    def refused(self, exc: Exception) -> bool:
        """Whether ``exc`` is the database refusing the group's rows (its data), so
        that each batch is worth trying alone."""
        ...

    def stale(self, exc: Exception) -> bool:
        """Whether ``exc``, beginning on a connection kept from an earlier group, says
        that connection died meanwhile (begin again on a new one)."""
        ...

    def failure(self, exc: Exception) -> LedgerError:
        """The error every batch of a group that failed with ``exc`` is answered with."""
        ...


@dataclass(slots=True)
class _Pending(Generic[W]):
    work: W
    future: concurrent.futures.Future[Any]
    alone: bool


@dataclass(slots=True)
class _Failed:
    error: BaseException


class Writer(Generic[C, W]):
    """The writer of one ledger (named ``what`` in messages: ``ledger PATH``).

    ``notify(last_seq, turn_ids)`` is called on the writer's thread after each
    commit that appended entries. ``conn``: a connection to begin with (else the
    first group opens one). ``clock``: the time each group's entries are stamped
    with (the ledger's format, :func:`overt.clock.now_iso`).
    """

    def __init__(self, store: Store[C, W], what: str, *, thread_name: str,
                 notify: Callable[[int, set[str | None]], None], conn: C | None = None,
                 limit: int = MAX_BATCH, clock: Callable[[], str] = now_iso) -> None:
        self.what = what
        self._clock = clock
        self._store = store
        self._notify = notify
        self._conn = conn
        self._limit = limit
        self._queue: queue.SimpleQueue[_Pending[W] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._dead: LedgerError | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=thread_name)

    def start(self) -> None:
        self._thread.start()

    def submit(self, work: W, *, alone: bool = False) -> concurrent.futures.Future[Any]:
        """Queue ``work``; its future is answered once it is committed (or failed).
        ``alone``: commit it in a group of its own (a prune).

        Raises:
            LedgerClosed: the ledger is closed.
            LedgerError: the writer died (the message says why).
        """
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        # running from now: a caller cancelled while waiting cannot take back a batch
        # the writer may be committing (and the writer's answer never meets a cancel)
        future.set_running_or_notify_cancel()
        with self._lock:
            if self._closed:
                raise LedgerClosed(f"{self.what} is closed")
            if self._dead is None and not self._thread.is_alive():
                self._dead = LedgerError(f"{self.what}: its writer is not running; nothing "
                                         "is written until the ledger is opened again")
            if self._dead is not None:
                raise self._dead
            self._queue.put(_Pending(work, future, alone))
        return future

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Answer every batch still queued with :class:`LedgerClosed`, let the writer
        finish the group it holds, and stop it. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queued = self._drain()
            self._queue.put(None)
        closed = LedgerClosed(f"{self.what} closed before this batch was written: "
                              "nothing of it was")
        for pending in queued:
            pending.future.set_exception(closed)
        if self._thread.ident is None:  # never started (read-only)
            if self._conn is not None:
                self._store.close(self._conn)
            return
        self._thread.join(wait_s)
        if self._thread.is_alive():
            log.warning("%s: closed while its writer still waits on a commit (over %.0f s); "
                        "the writer answers that group when the commit ends", self.what, wait_s)

    def _drain(self) -> list[_Pending[W]]:
        """Take every batch queued (the lock held)."""
        taken: list[_Pending[W]] = []
        while True:
            try:
                pending = self._queue.get_nowait()
            except queue.Empty:
                return taken
            if pending is not None:
                taken.append(pending)

    # -- the writer's thread --------------------------------------------------

    def _run(self) -> None:
        group: list[_Pending[W]] = []
        try:
            while True:
                group, stop = next_group(self._queue, self._limit)
                for part in _parts(group):
                    self._commit(part)
                group = []
                if stop:
                    return
        except BaseException as exc:  # noqa: BLE001  the writer dies: every caller is told why
            self._die(exc, group)
        finally:
            self._drop()

    def _die(self, exc: BaseException, held: list[_Pending[W]]) -> None:
        error = LedgerError(f"{self.what}: its writer stopped ({type(exc).__name__}: {exc}); "
                            "nothing is written until the ledger is opened again")
        log.error("%s", error, exc_info=exc)
        with self._lock:
            self._dead = error
            queued = self._drain()
        for pending in [*held, *queued]:
            if not pending.future.done():
                pending.future.set_exception(error)

    def _commit(self, group: list[_Pending[W]]) -> None:
        """Commit ``group`` in one transaction, then answer each of its callers."""
        store = self._store
        outcomes: list[Any] = []
        try:
            conn, head = self._begin()
            at = self._clock()
            alone = len(group) == 1
            for pending in group:
                try:
                    result, head = store.stage(conn, pending.work, head, at, alone)
                except Broken:
                    raise
                except Exception as exc:  # noqa: BLE001  this batch alone fails, answered with it
                    outcomes.append(_Failed(self._batch_error(exc)))
                    continue
                outcomes.append(result)
            store.commit(conn)
        except Exception as exc:  # noqa: BLE001  the group fails: each caller told why
            cause = exc.__cause__ if isinstance(exc, Broken) and isinstance(
                exc.__cause__, Exception) else exc
            self._rollback()
            if store.refused(cause):
                if len(group) > 1:
                    for pending in group:
                        self._commit([pending])
                    return
            else:
                self._drop()  # the connection may be what failed: a new one next time
            error = store.failure(cause)
            for pending in group:
                pending.future.set_exception(error)
            return
        last, turns = 0, set[str | None]()
        for pending, outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, _Failed):
                pending.future.set_exception(outcome.error)
                continue
            pending.future.set_result(outcome)
            if isinstance(outcome, list) and outcome and isinstance(outcome[-1], Entry):
                last = max(last, outcome[-1].seq)
                turns.update(e.turn_id for e in outcome)
        if last:
            self._notify(last, turns)

    def _begin(self) -> tuple[C, Head]:
        """Begin on the kept connection, or on a new one: a kept one that died since
        its last group (the server restarted) fails here, before anything of this
        group was sent, and the group begins once more on a new one."""
        if self._conn is not None:
            try:
                return self._conn, self._store.begin(self._conn)
            except Exception as exc:
                if not self._store.stale(exc):
                    raise
                log.warning("%s: the writer's connection was lost (%s); reconnecting",
                            self.what, " ".join(str(exc).split()))
                self._drop()
        self._conn = self._store.connect()
        return self._conn, self._store.begin(self._conn)

    def _rollback(self) -> None:
        if self._conn is None:
            return
        try:
            self._store.rollback(self._conn)
        except Exception:  # noqa: BLE001  a connection that cannot roll back is dropped
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            self._store.close(conn)
        except Exception as exc:  # noqa: BLE001  closing a broken connection: nothing to keep
            log.debug("%s: closing the writer's connection: %s", self.what, exc)

    def _batch_error(self, exc: Exception) -> Exception:
        if isinstance(exc, (LedgerError, LedgerConflict)):
            return exc
        return LedgerError(f"cannot append to {self.what}: {type(exc).__name__}: {exc}")


def _parts(group: list[_Pending[W]]) -> list[list[_Pending[W]]]:
    """``group`` in order, each batch to be committed alone in a part of its own."""
    if not any(p.alone for p in group):
        return [group] if group else []
    parts: list[list[_Pending[W]]] = []
    run: list[_Pending[W]] = []
    for pending in group:
        if pending.alone:
            if run:
                parts.append(run)
                run = []
            parts.append([pending])
        else:
            run.append(pending)
    if run:
        parts.append(run)
    return parts


def next_group(waiting: queue.SimpleQueue[P | None], limit: int) -> tuple[list[P], bool]:
    """The next group to commit, blocking for its first batch, and whether the
    writer should stop after it. An empty group means stop now. ``None`` on the
    queue asks the writer to stop once what came before it is written."""
    first = waiting.get()
    if first is None:
        return [], True
    group = [first]
    while len(group) < limit:
        try:
            more = waiting.get_nowait()
        except queue.Empty:
            break
        if more is None:
            return group, True
        group.append(more)
    return group, False
