"""Moves SQLite's WAL checkpoints off the commit path.

With ``synchronous=NORMAL`` a WAL commit does not wait for the disk; the
checkpoint that copies the WAL back into the database does (it syncs both
files). Left to SQLite's auto-checkpoint, that wait lands on whichever commit
crosses the threshold, and doubles the mean commit time. Here the writer turns
auto-checkpointing off and a thread with its own connection runs passive
checkpoints (which never block writers) after every ``every`` commits or
``interval_s`` seconds, whichever comes first. sqlite3 releases the GIL while
it works, so the checkpoint overlaps the next turns.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger("overt.ledger")


class Checkpointer:
    """A daemon thread checkpointing one SQLite file; :meth:`stop` ends it."""

    def __init__(self, path: str, *, every: int = 200, interval_s: float = 1.0) -> None:
        self._path = path
        self._every = every
        self._interval_s = interval_s
        self._commits = 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"overt-checkpoint:{path}",
                                        daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """Count one commit; wakes the thread every ``every`` commits."""
        self._commits += 1
        if self._commits >= self._every:
            self._commits = 0
            self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 1000")
            while not self._stopping:
                self._wake.wait(self._interval_s)
                self._wake.clear()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # the next round tries again; the WAL only grows
                    log.warning("WAL checkpoint of %s failed: %s", self._path, exc)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            log.warning("WAL checkpointer of %s stopped: %s", self._path, exc)
        finally:
            conn.close()
