"""A measurement, not part of overt: the turn of ``bench_turn`` on the SQLite ledger
as shipped, beside a prototype of a journal in front of it (see the turn part of
``benchmarks/README.md``). Not run by ``make bench``; run it alone:

    .venv/bin/python -m benchmarks.journal_prototype

The prototype chains each batch as the ledger does, writes the rows and bodies to
an append-only file with one ``os.write`` (length-prefixed ``marshal``: fine for a
measurement, not a format to keep), and returns; SQLite is fed either by a thread
(every batch waiting, in one transaction) or inline at each turn's end. It has
none of what a ledger needs beside that (one order across processes, claims,
rows beside the chain, readers catching up, replay on open, failures surfaced):
the README lists them. It measures what such a design would save, no more.
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_turn import _reply, lookup, timed_turns
from overt.channels.transcript import Transcript
from overt.clock import now_iso
from overt.events import Event
from overt.ledger import sql
from overt.ledger.base import Entry
from overt.ledger.canonical import GENESIS
from overt.ledger.chain import chain, content_rows, drafts
from overt.ledger.sql import SQLITE
from overt.ledger.sqlite import SqliteLedger, _keyed
from overt.models.fake import FunctionModel
from overt.runtime import Runtime

BLOCKS = 8
TURNS = 300
Batch = tuple[list[Any], list[Any]]


class JournalLedger(SqliteLedger):
    """The prototype: a batch is on the record once written to the journal."""

    def start(self, journal: Path, *, threaded: bool) -> None:
        self.fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.head = (0, GENESIS)
        self.threaded = threaded
        self.waiting: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()
        self.pending: list[Batch] = []
        self.feeder = threading.Thread(target=self._feed, daemon=True)
        if threaded:
            self.feeder.start()

    async def record(self, events: Sequence[Event], contents: Mapping[str, str] | None = None,
                     *, rows: Sequence[Any] = ()) -> list[Entry]:
        at = now_iso()
        chained, entries, head = chain(self.head, at, drafts(events))
        bodies = _keyed(content_rows(self.head[0] + 1, entries, contents), at) if contents else []
        blob = marshal.dumps((chained, bodies))
        os.write(self.fd, len(blob).to_bytes(4, "little") + blob)
        self.head = head
        if self.threaded:
            self.waiting.put((chained, bodies))
        else:
            self.pending.append((chained, bodies))
            if any(e.kind in ("turn.completed", "turn.paused") for e in entries):
                self._store(self.pending)
                self.pending = []
        return entries

    def _store(self, batches: list[Batch]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        for chained, bodies in batches:
            if bodies:
                conn.executemany(sql.insert_content(SQLITE), bodies)
            conn.executemany(sql.insert_entries(SQLITE), chained)
        conn.execute("COMMIT")

    def _feed(self) -> None:
        while True:
            first = self.waiting.get()
            batches = [] if first is None else [first]
            while True:
                try:
                    item = self.waiting.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    batches.append(item)
            if batches:
                self._store(batches)
            if first is None:
                return

    def drain(self) -> None:
        while self.threaded and not self.waiting.empty():
            time.sleep(0.0005)

    def stop(self) -> None:
        if self.threaded:
            self.waiting.put(None)
            self.feeder.join()
        os.close(self.fd)


async def _measure(directory: Path) -> None:
    ledgers: dict[str, SqliteLedger] = {"SQLite, as shipped": SqliteLedger.open(directory / "s.db")}
    for name, threaded in (("journal, SQLite fed by a thread", True),
                           ("journal, SQLite fed at each turn's end", False)):
        journal = JournalLedger.open(directory / f"{threaded}.db")
        journal.start(directory / f"{threaded}.journal", threaded=threaded)
        ledgers[name] = journal
    runtimes = {}
    for name, ledger in ledgers.items():
        model = FunctionModel(_reply)
        runtimes[name] = (Runtime(model=model, ledger=ledger, tools=[lookup],
                                  transcript=Transcript(directory / f"{id(model)}.jsonl")), model)
    for runtime, model in runtimes.values():
        await timed_turns(runtime, model, 500)
    medians: dict[str, list[float]] = {name: [] for name in runtimes}
    rates: dict[str, list[float]] = {name: [] for name in runtimes}
    for _ in range(BLOCKS):
        for name, (runtime, model) in runtimes.items():
            start = time.perf_counter()
            medians[name].append(statistics.median(await timed_turns(runtime, model, TURNS)))
            ledger = ledgers[name]
            if isinstance(ledger, JournalLedger):
                ledger.drain()
            rates[name].append(TURNS / (time.perf_counter() - start))
    for name in runtimes:
        print(f"  {name:42s} turn median: best block {min(medians[name]):5.0f} µs, "
              f"median block {statistics.median(medians[name]):5.0f} µs; "
              f"{statistics.median(rates[name]):6,.0f} turns/s with SQLite caught up")
    for ledger in ledgers.values():
        if isinstance(ledger, JournalLedger):
            ledger.stop()
        report = ledger.verify_sync()
        ledger.close_sync()
        assert report.ok, report


def main() -> None:
    logging.getLogger("overt").setLevel(logging.WARNING)
    print(f"a journal in front of SQLite (prototype; {BLOCKS} interleaved blocks of "
          f"{TURNS} turns each)")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_measure(Path(tmp)))


if __name__ == "__main__":
    main()
