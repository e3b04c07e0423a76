"""Signed checkpoints and Merkle proofs on a ledger of 1,000,000 entries (SQLite).

- checkpoint cost: the first checkpoint of an old ledger (every tile of its tree
  computed and stored), then one after 10,000 more entries (what ``overt serve``
  pays every ``every_entries``);
- one turn's proof (10 entries): size in bytes (target: under 10 KB) and the time
  to make it (target: under 50 ms), and the time to check it offline;
- ``verify --checkpoints``: entries per second of the chain checked against the
  checkpoints (target: at least 150,000/s), and of the full verify (content
  bodies and the trail index too) against them.

The 1,000,000-entry ledger is built once (bulk appends of 5,000 entries, about a
minute) and kept in the temp dir (``overt-bench-proofs/``); each run copies it, so
the first checkpoint is timed on a ledger that has no tree yet. Another size:
``OVERT_BENCH_PROOFS_ENTRIES``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._stats import row
from overt.events import RuntimeStarted
from overt.ledger import audit, checkpoints, proofs, signing
from overt.ledger.checkpoints import CheckpointSettings
from overt.ledger.sqlite import SqliteLedger

ENTRIES = int(os.environ.get("OVERT_BENCH_PROOFS_ENTRIES", "1000000"))
TURN = 10  # entries per turn
BATCH = 5_000
CACHE = Path(tempfile.gettempdir()) / "overt-bench-proofs"


class Timer:
    """Wall and CPU time of a block: on a shared machine the wall time counts other
    processes' turns on the CPU too; this process's own work is its CPU time."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def ms(self) -> str:
        return f"{self.wall * 1000:8.1f} ms wall, {self.cpu * 1000:8.1f} ms CPU"


def _events(first_turn: int, turns: int) -> list[RuntimeStarted]:
    return [RuntimeStarted(turn_id=f"turn-{t:08d}", session_id=f"s-{t // 100}",
                           overt_version="0.1.0", pid=step, host="bench", model="scripted")
            for t in range(first_turn, first_turn + turns) for step in range(TURN)]


def _cached_ledger() -> Path:
    path = CACHE / f"ledger-{ENTRIES}.db"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    building = path.with_suffix(".building")
    for leftover in CACHE.glob(building.name + "*"):
        leftover.unlink()
    start = time.perf_counter()
    ledger = SqliteLedger.open(building)
    try:
        for first in range(0, ENTRIES // TURN, BATCH // TURN):
            ledger.record_sync(_events(first, min(BATCH // TURN, ENTRIES // TURN - first)))
    finally:
        ledger.close_sync()
    os.replace(building, path)
    row("built the ledger once", f"{ENTRIES:,} entries in {time.perf_counter() - start:.1f} s "
        f"(cached in {CACHE})")
    return path


async def _bench(ledger: Any, work: Path) -> None:
    key = signing.write_keys(work / "k", work / "k.pub", "bench")
    settings = CheckpointSettings(str(work / "k"), str(work / "witness"))

    with Timer() as t:
        await checkpoints.make(ledger, key, settings)
    row("first checkpoint (builds the whole tree)", t.ms())

    for first in range(ENTRIES // TURN, ENTRIES // TURN + 1000, BATCH // TURN):
        await ledger.record(_events(first, BATCH // TURN))
    with Timer() as t:
        checkpoint, note = await checkpoints.make(ledger, key, settings)
    row("checkpoint after 10,000 more entries", t.ms())

    turn = f"turn-{ENTRIES // TURN // 2:08d}"
    walls, cpus, data = [], [], b""
    for _ in range(20):
        with Timer() as t:
            proof = await proofs.prove(ledger, turn, note, checkpoint, key.public)
            data = proofs.dump(proof).encode()
        walls.append(t.wall * 1000)
        cpus.append(t.cpu * 1000)
    row("one turn's proof (10 entries): size", f"{len(data):8,} bytes   (target < 10,000)")
    row("one turn's proof: time to make", f"median {statistics.median(walls):6.1f} ms wall, "
        f"{statistics.median(cpus):6.1f} ms CPU   (target < 50)")
    with Timer() as t:
        for _ in range(20):
            proofs.check(data, key.public)
    row("one turn's proof: time to check offline", f"{t.wall / 20 * 1000:8.1f} ms")

    found = [c for _, c in checkpoints.read_witness_dir(Path(settings.witness_dir),
                                                        key.public)[0]]
    total = checkpoint.size + 1
    for label, options in (("verify --checkpoints, chain", {"check_content": False,
                                                            "check_index": False}),
                           ("verify --checkpoints, everything", {})):
        with Timer() as t:
            chain = await ledger.verify(**options)
            report = await audit.verify_against(ledger, chain, found)
        assert report.ok, report.problem
        row(label, f"{total / t.wall:10,.0f} entries/s wall, {total / t.cpu:10,.0f} /s CPU "
            f"({t.wall:.2f} s)")
    row("(target)", "verify with checkpoints >= 150,000 entries/s")


def main() -> None:
    print(f"proofs: checkpoints and Merkle proofs, SQLite, {ENTRIES:,} entries")
    cached = _cached_ledger()
    with tempfile.TemporaryDirectory(prefix="overt-bench-proofs-") as tmp:
        work = Path(tmp)
        shutil.copy(cached, work / "ledger.db")
        ledger = SqliteLedger.open(work / "ledger.db")
        try:
            asyncio.run(_bench(ledger, work))
        finally:
            ledger.close_sync()


if __name__ == "__main__":
    main()
