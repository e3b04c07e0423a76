"""How fast this machine is, so figures from different machines can be compared.

Small shared virtual machines of one kind differ by two times or more from one
day to the next, so a figure compares only beside these. Four figures owe nothing to
overt: a bare Python loop, a one-row SQLite commit in WAL mode (the ledger's
settings), an fsync, and an event loop handing an empty batch to a thread and
getting its answer back (the floor of each ledger commit: the writer thread's
queue, :func:`~overt.ledger.groups.next_group` and future, with no work between).
A figure elsewhere in this run reads against them: ``bench_turn`` pays that
hand-off once for each of its commits, and a virtual machine that halts an idle
virtual CPU at once makes it several times dearer than one pinned to one core
(``taskset -c 0``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from benchmarks._stats import row
from overt.ledger.groups import next_group

LOOP = 3_000_000
COMMITS = 3_000
FSYNCS = 50
HANDOFFS = 5_000


def _loop_ns() -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(LOOP):
            pass
        best = min(best, (time.perf_counter() - start) / LOOP * 1e9)
    return best


def _commit_us(directory: Path) -> float:
    conn = sqlite3.connect(directory / "machine.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
        start = time.perf_counter()
        for _ in range(COMMITS):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (body) VALUES (?)", ("x" * 300,))
            conn.execute("COMMIT")
        return (time.perf_counter() - start) / COMMITS * 1e6
    finally:
        conn.close()


def _fsync_ms(directory: Path) -> float:
    samples = []
    fd = os.open(directory / "fsync.bin", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for _ in range(FSYNCS):
            os.write(fd, b"x" * 4096)
            start = time.perf_counter()
            os.fsync(fd)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
    return sorted(samples)[len(samples) // 2]


def _handoff_us() -> float:
    """Median µs for an event loop to queue an empty batch to a thread and await the
    thread's answer, as the ledger's :meth:`record` waits on its writer."""
    waiting: queue.SimpleQueue[concurrent.futures.Future[None] | None] = queue.SimpleQueue()

    def answer() -> None:  # the ledger writer's loop, with no commit in it
        while True:
            group, stop = next_group(waiting, 1)
            for future in group:
                future.set_result(None)
            if stop:
                return

    async def measure() -> list[float]:
        samples = []
        for _ in range(HANDOFFS):
            start = time.perf_counter_ns()
            future: concurrent.futures.Future[None] = concurrent.futures.Future()
            future.set_running_or_notify_cancel()
            waiting.put(future)
            await asyncio.wrap_future(future)
            samples.append((time.perf_counter_ns() - start) / 1000)
        return samples

    thread = threading.Thread(target=answer, name="bench-handoff")
    thread.start()
    try:
        samples = asyncio.run(measure())
    finally:
        waiting.put(None)
        thread.join()
    return statistics.median(samples[HANDOFFS // 10:])


def main() -> dict[str, float]:
    print("this machine (nothing of overt: read the other figures against these)")
    with tempfile.TemporaryDirectory() as tmp:
        figures = {"loop_ns": _loop_ns(), "commit_us": _commit_us(Path(tmp)),
                   "fsync_ms": _fsync_ms(Path(tmp)), "handoff_us": _handoff_us()}
    row("empty Python loop", f"{figures['loop_ns']:6.1f} ns per iteration")
    row("SQLite WAL commit of one row", f"{figures['commit_us']:6.1f} µs (synchronous=NORMAL)")
    row("fsync of 4 KiB", f"{figures['fsync_ms']:6.2f} ms (median)")
    row("event loop -> thread -> event loop, empty", f"{figures['handoff_us']:6.1f} µs (median)")
    return figures


if __name__ == "__main__":
    main()
