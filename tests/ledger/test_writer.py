"""The writer thread never leaves a caller waiting, on both backends.

Closing answers every batch still queued (:class:`LedgerClosed`); a writer that dies
fails every pending and later call with a :class:`LedgerError` that says why; a batch
submitted while the ledger closes is answered (met at random, and every time with a
pause injected into its put); a batch whose own part fails fails
alone and the writer goes on; reads never wait on the default executor.

A caller left waiting shows as :func:`asyncio.wait_for` timing out: each test's
failure signal is a timeout, never a sleep.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from overt.errors import LedgerClosed, LedgerError
from overt.events import TurnStarted
from overt.ledger import open_ledger
from overt.ledger.base import Entry
from overt.ledger.canonical import digest_text
from overt.ledger.notify import AppendSignal
from overt.ledger.pg_url import parse_url
from tests import backends

ANSWER_S = 20.0
"""How long any caller may wait for its answer before the test calls it hung (a
commit takes milliseconds; a busy machine may make it a second)."""


def _started(n: int, session: str = "s") -> TurnStarted:
    return TurnStarted(turn_id=f"t{n}", session_id=session, source="cli",
                       caller_session_id="cli:s", model="scripted", route="default",
                       max_tool_calls=5,
                       actor="operator:default", message_digest=digest_text(f"m{n}"))


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as CPython allows, so races are met far more often."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _count(url: str) -> int:
    raw = backends.Raw(url)
    try:
        return int(raw.query("SELECT count(*) FROM audit_log")[0][0])
    finally:
        raw.close()


# -- closing ----------------------------------------------------------------


def test_closing_under_load_answers_every_caller(ledger_url: str) -> None:
    """Many turns recording at once, the ledger closed among them: each is answered,
    stored or refused with LedgerClosed, and what was answered stored is stored."""
    ledger: Any = open_ledger(ledger_url)

    async def scenario() -> list[object]:
        calls = [asyncio.ensure_future(ledger.record([_started(n)])) for n in range(300)]
        await asyncio.sleep(0)  # every call submitted; some taken by the writer
        closing = asyncio.ensure_future(ledger.close())
        later = [asyncio.ensure_future(ledger.record([_started(1000 + n)])) for n in range(50)]
        answers = await asyncio.wait_for(
            asyncio.gather(*calls, *later, return_exceptions=True), ANSWER_S)
        await asyncio.wait_for(closing, ANSWER_S)
        return answers

    answers = asyncio.run(scenario())
    stored = [a for a in answers if isinstance(a, list)]
    refused = [a for a in answers if isinstance(a, LedgerClosed)]
    assert len(stored) + len(refused) == len(answers), [
        a for a in answers if not isinstance(a, (list, LedgerClosed))][:3]
    assert all(isinstance(a, LedgerClosed) for a in answers[300:])  # after close began
    assert _count(ledger_url) == len(stored)


def test_closing_answers_each_batch_still_queued_with_ledger_closed(ledger_url: str) -> None:
    """The writer held up (another process holds the chain's write lock): the batch it
    took commits once the lock is free, the batches queued behind it are answered
    LedgerClosed as soon as close begins, not once the writer is free."""
    ledger: Any = open_ledger(ledger_url)
    holder = _hold_write_lock(ledger_url)

    async def scenario() -> tuple[object, list[object]]:
        taken = asyncio.ensure_future(ledger.record([_started(0)]))
        await _until(lambda: holder.waited_on(), "the writer waits for the lock")
        queued = [asyncio.ensure_future(ledger.record([_started(n)])) for n in range(1, 6)]
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(ledger.close())
        refused = await asyncio.wait_for(
            asyncio.gather(*queued, return_exceptions=True), ANSWER_S)
        assert not taken.done()
        holder.release()
        first = await asyncio.wait_for(taken, ANSWER_S)
        await asyncio.wait_for(closing, ANSWER_S)
        return first, refused

    try:
        first, refused = asyncio.run(scenario())
    finally:
        holder.release()
    assert isinstance(first, list) and [e.seq for e in first] == [1]
    assert all(isinstance(r, LedgerClosed) for r in refused), refused
    assert _count(ledger_url) == 1


@pytest.mark.slow
@pytest.mark.usefixtures("fast_switching")
def test_a_record_racing_close_is_always_answered(ledger_url: str, backend: str) -> None:
    """Callers on the event loop keep recording while another thread closes the
    ledger, again and again: every call returns or raises LedgerClosed."""
    rounds = 40 if backend == "sqlite" else 12
    rng = random.Random(34)

    async def recorder(ledger: Any, n: int) -> int:
        done = 0
        while True:
            try:
                await ledger.record([_started(n * 10_000 + done)])
            except LedgerClosed:
                return done
            done += 1

    async def one_round(ledger: Any) -> None:
        callers = [asyncio.ensure_future(recorder(ledger, n)) for n in range(4)]
        await asyncio.sleep(rng.random() * 0.01)
        closing = asyncio.ensure_future(asyncio.to_thread(ledger.close_sync))
        await asyncio.wait_for(asyncio.gather(*callers), ANSWER_S)
        await asyncio.wait_for(closing, ANSWER_S)

    for _ in range(rounds):
        ledger: Any = open_ledger(ledger_url)
        asyncio.run(one_round(ledger))


@pytest.mark.slow
@pytest.mark.usefixtures("fast_switching")
def test_a_record_from_threads_racing_close_is_always_answered(ledger_url: str,
                                                             backend: str) -> None:
    """The same from plain threads (``record_sync``): none is left waiting."""
    rounds = 40 if backend == "sqlite" else 12
    for _ in range(rounds):
        ledger: Any = open_ledger(ledger_url)
        answered: list[str] = []

        def recorder(n: int, ledger: Any = ledger, answered: list[str] = answered) -> None:
            for k in range(10_000):
                try:
                    ledger.record_sync([_started(n * 10_000 + k)])
                except LedgerClosed:
                    answered.append("closed")
                    return

        threads = [threading.Thread(target=recorder, args=(n,), daemon=True) for n in range(4)]
        for thread in threads:
            thread.start()
        ledger.close_sync()
        deadline = time.monotonic() + ANSWER_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads), "a record_sync was never answered"
        assert answered == ["closed"] * 4


class _SlowPut:
    """The writer's queue, with a pause injected into ``put``: a submit that passed
    its closed check is still putting when close begins (the race, met every time)."""

    def __init__(self, inner: Any, pause_s: float) -> None:
        self.inner, self.pause_s = inner, pause_s
        self.putting = threading.Event()

    def put(self, item: Any) -> None:
        if item is not None:  # a batch, not close's stop
            self.putting.set()
            time.sleep(self.pause_s)
        self.inner.put(item)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get(*args, **kwargs)

    def get_nowait(self) -> Any:
        return self.inner.get_nowait()


def test_a_batch_put_while_close_begins_is_answered(ledger_url: str) -> None:
    """A submit that checked the ledger open, then is paused putting its batch while
    another thread closes the ledger: the caller is answered (LedgerClosed, nothing
    stored, or stored when the writer took it first), never left waiting on a batch
    queued behind the writer's stop."""
    ledger: Any = open_ledger(ledger_url)
    ledger.record_sync([_started(0)])  # the writer is running
    slow = _SlowPut(ledger._writer._queue, pause_s=0.3)
    ledger._writer._queue = slow
    answers: list[object] = []

    def recorder() -> None:
        try:
            answers.append(ledger.record_sync([_started(1)]))
        except Exception as exc:  # noqa: BLE001  the answer is what the test reads
            answers.append(exc)

    thread = threading.Thread(target=recorder, daemon=True)
    thread.start()
    assert slow.putting.wait(ANSWER_S)
    closing = threading.Thread(target=ledger.close_sync, daemon=True)
    closing.start()
    thread.join(ANSWER_S)
    closing.join(ANSWER_S)
    assert not thread.is_alive(), "the record put while closing was never answered"
    assert not closing.is_alive(), "close never returned"
    # the writer may take the batch before close drains the queue: then it is stored
    assert len(answers) == 1 and isinstance(answers[0], (list, LedgerClosed)), answers
    assert _count(ledger_url) == (2 if isinstance(answers[0], list) else 1)


def test_after_close_every_call_is_refused_at_once(ledger: Any) -> None:
    ledger.close_sync()
    with pytest.raises(LedgerClosed):
        ledger.record_sync([_started(1)])
    with pytest.raises(LedgerClosed):
        asyncio.run(asyncio.wait_for(ledger.record([_started(2)]), ANSWER_S))
    with pytest.raises(LedgerClosed):
        asyncio.run(asyncio.wait_for(ledger.entries(), ANSWER_S))
    ledger.close_sync()  # twice: nothing more


# -- a writer that dies ---------------------------------------------------------


class _Broken(AppendSignal):
    """An append signal that fails on the writer's thread, as a bug there would."""

    def notify(self, seq: int, turn_ids: Any = ()) -> None:
        raise RuntimeError("the signal is broken")


def test_a_writer_that_dies_fails_every_pending_and_later_call_saying_why(
        ledger: Any, ledger_url: str) -> None:
    """The writer's thread fails outside any batch (here: the append signal it calls
    after each commit). The batch it had committed is answered stored; those queued
    behind it, and every call after, fail with a LedgerError naming the cause."""
    ledger.record_sync([_started(0)])
    ledger.appended = _Broken()
    holder = _hold_write_lock(ledger_url)

    async def scenario() -> tuple[object, list[object]]:
        taken = asyncio.ensure_future(ledger.record([_started(1)]))
        await _until(holder.waited_on, "the writer waits for the lock")
        queued = [asyncio.ensure_future(ledger.record([_started(n)])) for n in range(2, 20)]
        await asyncio.sleep(0)
        holder.release()
        first = await asyncio.wait_for(taken, ANSWER_S)
        failed = await asyncio.wait_for(asyncio.gather(*queued, return_exceptions=True),
                                        ANSWER_S)
        return first, failed

    try:
        first, failed = asyncio.run(scenario())
    finally:
        holder.release()
    assert isinstance(first, list) and [e.turn_id for e in first] == ["t1"]
    assert all(isinstance(a, LedgerError) and not isinstance(a, LedgerClosed)
               for a in failed), failed[:3]
    assert all("RuntimeError: the signal is broken" in str(a) for a in failed), failed[0]
    # later calls too, at once: the writer's state is checked on submit
    with pytest.raises(LedgerError, match="the signal is broken"):
        ledger.record_sync([_started(99)])
    with pytest.raises(LedgerError, match="the signal is broken"):
        asyncio.run(asyncio.wait_for(ledger.record([_started(98)]), ANSWER_S))
    # reads go on, and show only what was answered stored
    assert [e.turn_id for e in asyncio.run(ledger.entries())] == ["t0", "t1"]
    ledger.close_sync()


def test_a_batch_whose_body_is_not_text_fails_alone_and_the_writer_goes_on(
        ledger: Any) -> None:
    """A body that is not a string raises inside the writer's own code (not the
    driver's): that batch fails, with a LedgerError, and later ones are stored."""
    async def scenario() -> list[object]:
        bad = ledger.record([_started(1)], {digest_text("m1"): 42})  # type: ignore[dict-item]
        good = [ledger.record([_started(n)], {digest_text(f"m{n}"): f"m{n}"})
                for n in range(2, 6)]
        return await asyncio.wait_for(asyncio.gather(bad, *good, return_exceptions=True),
                                      ANSWER_S)

    answers = asyncio.run(scenario())
    assert isinstance(answers[0], LedgerError), answers[0]
    assert all(isinstance(a, list) for a in answers[1:]), answers[1:]
    after = asyncio.run(asyncio.wait_for(
        ledger.record([_started(9)], {digest_text("m9"): "m9"}), ANSWER_S))
    assert [e.turn_id for e in after] == ["t9"]
    assert sorted(e.turn_id for e in asyncio.run(ledger.entries())) == [
        "t2", "t3", "t4", "t5", "t9"]
    assert asyncio.run(ledger.verify()).ok


# -- reads ----------------------------------------------------------------------


def test_reads_do_not_wait_on_the_default_executor(ledger: Any) -> None:
    """The default executor busy (the local model generating, sync tools running):
    the ledger still reads, on threads of its own."""
    ledger.record_sync([_started(1)], {digest_text("m1"): "m1"})
    release = threading.Event()

    async def scenario() -> list[Entry]:
        loop = asyncio.get_running_loop()
        busy = concurrent.futures.ThreadPoolExecutor(1)
        loop.set_default_executor(busy)
        held = loop.run_in_executor(None, release.wait, ANSWER_S)
        try:
            entries: list[Entry] = await asyncio.wait_for(ledger.entries(), ANSWER_S / 4)
            report = await asyncio.wait_for(ledger.verify(), ANSWER_S / 4)
            assert report.ok
            return entries
        finally:
            release.set()
            await held

    assert [e.turn_id for e in asyncio.run(scenario())] == ["t1"]


# -- helpers --------------------------------------------------------------------


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + ANSWER_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.01)


class _LockHolder:
    """Another process's connection holding what the ledger's writer must take first:
    SQLite's write lock (``BEGIN IMMEDIATE``); on PostgreSQL, the chain table itself
    (the writer reads the chain's head once it holds the chain lock)."""

    def __init__(self, url: str) -> None:
        self.pg = url.startswith("postgresql")
        self._released = False
        if self.pg:
            import psycopg

            conninfo, schema = parse_url(url)
            self._table = f'"{schema}".audit_log'
            self.conn: Any = psycopg.connect(conninfo, autocommit=True)
            self.conn.execute("BEGIN")
            self.conn.execute(f"LOCK TABLE {self._table} IN ACCESS EXCLUSIVE MODE")
            self._watch: Any = psycopg.connect(conninfo, autocommit=True)
        else:
            import sqlite3

            self.conn = sqlite3.connect(url, isolation_level=None, check_same_thread=False)
            self.conn.execute("BEGIN IMMEDIATE")

    def waited_on(self) -> bool:
        """Whether the ledger's writer waits for the lock: PostgreSQL shows it; SQLite
        does not, so there, whether a writer thread is beginning its transaction (in
        the busy handler of ``BEGIN IMMEDIATE``)."""
        if not self.pg:
            writers = {t.ident for t in threading.enumerate()
                       if t.name.startswith("overt-ledger-writer")}
            for ident, frame in sys._current_frames().items():
                if ident not in writers:
                    continue
                names = []
                while frame is not None:
                    names.append(frame.f_code.co_name)
                    frame = frame.f_back
                if "begin" in names:
                    return True
            return False
        row = self._watch.execute(
            "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted",
            (self._table,)).fetchone()
        return bool(row[0])

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self.conn.execute("ROLLBACK")
        self.conn.close()
        if self.pg:
            self._watch.close()


def _hold_write_lock(url: str) -> _LockHolder:
    return _LockHolder(url)
