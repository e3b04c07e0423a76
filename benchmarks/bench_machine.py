"""How fast this machine is, so figures from different machines can be compared.

The targets were set on one 2-core VM; machines of the same kind differ by two
times or more from one day to the next (a session measured the same commit's
turn at 638 µs on one and 1,790 µs on another). Three figures owe nothing to
overt: a bare Python loop, a one-row SQLite commit in WAL mode (the ledger's
settings), and an fsync. A figure elsewhere in this run reads against them.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path

from benchmarks._stats import row

LOOP = 3_000_000
COMMITS = 3_000
FSYNCS = 50


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


def main() -> dict[str, float]:
    print("this machine (nothing of overt: read the other figures against these)")
    with tempfile.TemporaryDirectory() as tmp:
        figures = {"loop_ns": _loop_ns(), "commit_us": _commit_us(Path(tmp)),
                   "fsync_ms": _fsync_ms(Path(tmp))}
    row("empty Python loop", f"{figures['loop_ns']:6.1f} ns per iteration")
    row("SQLite WAL commit of one row", f"{figures['commit_us']:6.1f} µs (synchronous=NORMAL)")
    row("fsync of 4 KiB", f"{figures['fsync_ms']:6.2f} ms (median)")
    return figures


if __name__ == "__main__":
    main()
