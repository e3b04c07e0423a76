"""Ledger: audit records appended per second, and ``verify`` entries per second (SQLite)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks._stats import row
from overt.events import ToolCallCompleted
from overt.ledger.sqlite import SqliteLedger

ENTRIES = 200_000
BATCH = 4


def _event(n: int) -> ToolCallCompleted:
    return ToolCallCompleted(
        turn_id="01JBENCHTURN00000000000000", session_id="cli:bench",
        tool_call_id=f"call-{n}", tool_name="lookup", triggered_by="cli",
        caller_session_id="cli:bench", tool_status="ok", tool_duration_ms=0.1, exc_type=None,
        args_sha256="sha256:" + "ab" * 32, result_digest="sha256:" + "cd" * 32)


def main() -> dict[str, float]:
    print(f"ledger (SQLite, WAL): {ENTRIES} audit entries, {BATCH} per transaction")
    with tempfile.TemporaryDirectory() as tmp:
        ledger = SqliteLedger.open(Path(tmp) / "verify.db")
        events = [_event(n) for n in range(BATCH)]
        start = time.perf_counter()
        for _ in range(ENTRIES // BATCH):
            ledger.record_sync(events)
        append_rate = ENTRIES / (time.perf_counter() - start)
        start = time.perf_counter()
        report = ledger.verify_sync(check_content=False)
        verify_rate = report.entries / (time.perf_counter() - start)
        ledger.close_sync()
    assert report.ok
    row("audit records appended", f"{append_rate:10,.0f} entries/s (each commit durable vs crash)")
    row("verify", f"{verify_rate:10,.0f} entries/s (target >= 150,000)")
    return {"append_per_s": append_rate, "verify_per_s": verify_rate}


if __name__ == "__main__":
    main()
