"""The ledger on each backend.

- audit records appended per second by one writer (4 entries per transaction,
  each transaction committed: the shape of one turn step);
- ``verify`` entries per second, the chain (target: at least 150,000/s
  on both backends), and the chain with its trail index checked against it
  (every entry here is a ``tool_call.completed``, all of them in the index: the
  check's worst case);
- PostgreSQL: aggregate turns per second with 8 worker processes sharing one
  ledger (target: at least 300 turns/s), each worker with turns in flight at
  once, as an ``overt serve`` worker has; timed from when all are ready.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._pg import scratch_schema, unreachable
from benchmarks._stats import row
from overt.events import ToolCallCompleted
from overt.ledger import open_ledger

WORKLOAD = Path(__file__).resolve().parent / "workload.py"
APPEND_ENTRIES = 40_000
VERIFY_ENTRIES = 200_000
BATCH = 4
# Turns in flight per worker: group commit shares each commit (and its fsync under
# the chain lock) between the turns queued meanwhile, so throughput grows with it.
CONCURRENCY = (16, 48)


def _event(n: int) -> ToolCallCompleted:
    return ToolCallCompleted(
        turn_id="01JBENCHTURN00000000000000", session_id="cli:bench",
        tool_call_id=f"call-{n}", tool_name="lookup", triggered_by="cli",
        caller_session_id="cli:bench", tool_status="ok", tool_duration_ms=0.1, exc_type=None,
        args_sha256="sha256:" + "ab" * 32, result_digest="sha256:" + "cd" * 32)


def _append_rate(ledger: Any, entries: int) -> float:
    events = [_event(n) for n in range(BATCH)]
    start = time.perf_counter()
    for _ in range(entries // BATCH):
        ledger.record_sync(events)
    return entries / (time.perf_counter() - start)


def _bulk(ledger: Any, entries: int) -> None:
    events = [_event(n) for n in range(500)]
    for _ in range(entries // 500):
        ledger.record_sync(events)


def _verify_rate(ledger: Any, *, check_index: bool = False) -> tuple[float, int, list[float]]:
    """Best of three full verifies (the first also warms SQLite's page cache)."""
    rates = []
    for _ in range(3):
        start = time.perf_counter()
        report = ledger.verify_sync(check_content=False, check_index=check_index)
        assert report.ok
        rates.append(report.entries / (time.perf_counter() - start))
    return max(rates), report.entries, rates


def _workers(url: str, processes: int, turns: int, concurrency: int) -> float:
    """Aggregate turns/s of ``processes`` workers started together once all are ready."""
    procs = [subprocess.Popen([sys.executable, str(WORKLOAD), url, str(turns), str(concurrency),
                               f"w{n}", "--wait"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
             for n in range(processes)]
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("a worker failed to start")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    began, ended = [], []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        fields = out.split()
        if proc.returncode != 0 or fields[:1] != ["done"]:
            raise RuntimeError(f"worker failed: {out}")
        began.append(float(fields[3]))
        ended.append(float(fields[4]))
    return processes * turns / (max(ended) - min(began))


def main() -> dict[str, float]:
    print("ledger backends")
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_ledger: Any = open_ledger(str(Path(tmp) / "bench.db"))
        figures["sqlite_append"] = _append_rate(sqlite_ledger, APPEND_ENTRIES)
        _bulk(sqlite_ledger, VERIFY_ENTRIES - APPEND_ENTRIES)
        figures["sqlite_verify"], n, runs = _verify_rate(sqlite_ledger)
        figures["sqlite_verify_index"], _, _ = _verify_rate(sqlite_ledger, check_index=True)
        sqlite_ledger.close_sync()
    row("SQLite: audit records appended", f"{figures['sqlite_append']:10,.0f} entries/s")
    row("SQLite: verify", f"{figures['sqlite_verify']:10,.0f} entries/s over {n:,} "
        "(target >= 150,000)")
    row("  each of 3 runs", ", ".join(f"{r:,.0f}" for r in runs))
    row("SQLite: verify, the trail index too", f"{figures['sqlite_verify_index']:10,.0f} "
        "entries/s (every entry in the index; `overt ledger verify` does this)")

    if (why := unreachable()) is not None:
        row("PostgreSQL", f"skipped: {why}")
        return figures
    with scratch_schema("ledger") as (url, _):
        pg_ledger: Any = open_ledger(url)
        figures["pg_append"] = _append_rate(pg_ledger, APPEND_ENTRIES // 10)
        _bulk(pg_ledger, VERIFY_ENTRIES - APPEND_ENTRIES // 10)
        figures["pg_verify"], n, runs = _verify_rate(pg_ledger)
        figures["pg_verify_index"], _, _ = _verify_rate(pg_ledger, check_index=True)
        pg_ledger.close_sync()
    row("PostgreSQL: audit records appended, 1 writer",
        f"{figures['pg_append']:10,.0f} entries/s (a commit each 4: fsync-bound)")
    row("PostgreSQL: verify", f"{figures['pg_verify']:10,.0f} entries/s over {n:,} "
        "(target >= 150,000)")
    row("  each of 3 runs", ", ".join(f"{r:,.0f}" for r in runs))
    row("PostgreSQL: verify, the trail index too", f"{figures['pg_verify_index']:10,.0f} "
        "entries/s")

    for concurrency in CONCURRENCY:
        with scratch_schema("workers") as (url, _):
            open_ledger(url).close_sync()  # type: ignore[attr-defined]
            rate = _workers(url, processes=8, turns=400, concurrency=concurrency)
            figures[f"pg_turns_{concurrency}"] = rate
            check: Any = open_ledger(url)
            report = check.verify_sync(check_content=False)
            check.close_sync()
        row(f"PostgreSQL: 8 workers, {concurrency} turns in flight each",
            f"{rate:10,.0f} turns/s aggregate (target >= 300; start-up not timed); "
            f"{report.entries:,} entries after, verify ok={report.ok}")
    return figures


if __name__ == "__main__":
    main()
