"""Several processes write one ledger at once: no record lost, and the chain still holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.ledger import open_ledger
from tests.backends import Raw
from tests.conftest import latest, run

WORKLOAD = Path(__file__).resolve().parents[2] / "benchmarks" / "workload.py"


def _run_workers(url: str, processes: int, turns: int, concurrency: int) -> None:
    procs = [subprocess.Popen([sys.executable, str(WORKLOAD), url, str(turns), str(concurrency),
                               f"worker-{n}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for n in range(processes)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert out.startswith(f"done {turns} ")


def _kind_counts(ledger: Any) -> dict[str, int]:
    return {kind: run(ledger.count(kind)) for kind in (
        "runtime.started", "turn.started", "inference", "tool_call.started",
        "tool_call.completed", "turn.completed", "policy.decision", "reasoning.step")}


def _assert_tampering_is_detected(ledger: Any, raw: Raw) -> None:
    raw.drop_guards()
    total = run(ledger.verify(check_content=False)).entries
    middle = total // 2
    # one row changed
    (data,) = raw.query("SELECT data FROM audit_log WHERE seq = ?", (middle,))[0]
    raw.execute("UPDATE audit_log SET data = ? WHERE seq = ?", (data.replace("1", "2", 1), middle))
    assert run(ledger.verify(check_content=False)).bad_seq == middle
    raw.execute("UPDATE audit_log SET data = ? WHERE seq = ?", (data, middle))
    assert run(ledger.verify(check_content=False)).ok
    # one row deleted
    row = raw.query("SELECT * FROM audit_log WHERE seq = ?", (middle,))[0]
    raw.execute("DELETE FROM audit_log WHERE seq = ?", (middle,))
    assert run(ledger.verify(check_content=False)).bad_seq == middle + 1
    raw.execute("INSERT INTO audit_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    assert run(ledger.verify(check_content=False)).ok
    # two rows swapped
    raw.execute("UPDATE audit_log SET seq = -1 WHERE seq = ?", (middle,))
    raw.execute("UPDATE audit_log SET seq = ? WHERE seq = ?", (middle, middle + 1))
    raw.execute("UPDATE audit_log SET seq = ? WHERE seq = -1", (middle + 1,))
    assert run(ledger.verify(check_content=False)).bad_seq == middle


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "processes", "turns", "concurrency"), [
    ("postgres", 8, 200, 10),
    ("sqlite", 2, 200, 5),
], indirect=["backend"])
def test_concurrent_processes_lose_no_record_and_keep_one_verifiable_chain(
    ledger_url: str, processes: int, turns: int, concurrency: int
) -> None:
    open_ledger(ledger_url).close_sync()  # type: ignore[attr-defined]  # migrate once up front
    _run_workers(ledger_url, processes, turns, concurrency)
    ledger: Any = open_ledger(ledger_url)
    total = processes * turns
    assert _kind_counts(ledger) == {
        "runtime.started": processes, "turn.started": total, "inference": 2 * total,
        "tool_call.started": 2 * total, "tool_call.completed": 2 * total,
        "turn.completed": total, "policy.decision": 2 * total,
        "reasoning.step": 2 * total}
    report = run(ledger.verify())
    assert report.ok, report
    assert report.entries == processes + 12 * total
    raw = Raw(ledger_url)
    try:
        _assert_tampering_is_detected(ledger, raw)
    finally:
        raw.close()
        ledger.close_sync()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres", "sqlite"], indirect=True)
def test_processes_that_migrate_at_once_all_succeed(ledger_url: str) -> None:
    _run_workers(ledger_url, processes=4, turns=1, concurrency=1)
    ledger: Any = open_ledger(ledger_url)
    assert ledger.schema_versions() == latest(ledger_url)
    assert run(ledger.verify()).ok
    ledger.close_sync()
