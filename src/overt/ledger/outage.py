"""A ledger's server out of reach, logged in proportion to what an operator needs.

While PostgreSQL is down every append, read and connection attempt fails, each
for the same reason; logged one by one they flood the log (two lines each: libpq's
message spans two). An :class:`Outage` logs the first failure in full, then at
most one line every :data:`SUMMARY_S` counting those since (and the latest error),
and the end of the outage: how many failed, over how long. Nothing is dropped
uncounted. Each failure still reaches its caller as
:class:`~overt.errors.LedgerUnavailable`, and callers log those at INFO
(``overt -v``), so every one can still be seen one by one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

SUMMARY_S = 60.0
"""At most one line per this many seconds while an outage lasts."""

POOL_LOGGER = "psycopg.pool"
_POOL_FAILURES = ("error connecting in %r: %s",
                  "reconnection attempt in pool %r failed after %s sec")
"""psycopg_pool's two warnings of a failed connection attempt (its format strings, so
a psycopg_pool that words them otherwise is logged as it logs them: nothing lost)."""


def one_line(error: object) -> str:
    return " ".join(str(error).split())


class Outage:
    """The failures of one ledger to reach its server (thread-safe: the writer, the
    readers and the connection pool's workers report here). ``name`` heads each line."""

    def __init__(self, name: str, log: logging.Logger, *, summary_s: float = SUMMARY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.summary_s = summary_s
        self._log = log
        self._clock = clock
        self._lock = threading.Lock()
        self._began: float | None = None
        self._summarized = 0.0
        self._failed: Counter[str] = Counter()
        self._unlogged = 0
        self._latest = ""

    @property
    def ongoing(self) -> bool:
        return self._began is not None

    def failed(self, what: str, error: object) -> None:
        """Count one failure of ``what`` (``append``, ``read``, ``connection attempt``);
        logged if it begins the outage, or if a summary is due."""
        now = self._clock()
        with self._lock:
            self._failed[what] += 1
            self._latest = one_line(error)
            if self._began is None:
                self._began = self._summarized = now
                self._log.warning("%s: the server is out of reach: %s failed: %s (further "
                                  "failures are counted, one line per %.0f s, until it "
                                  "answers)", self.name, what, self._latest, self.summary_s)
                return
            self._unlogged += 1
            if now - self._summarized < self.summary_s:
                return
            counted, self._unlogged, self._summarized = self._unlogged, 0, now
            self._log.warning("%s: still out of reach after %.0f s: %d more failures "
                              "(%s); the latest: %s", self.name, now - self._began, counted,
                              _counts(self._failed), self._latest)

    def answered(self) -> None:
        """The server answered: an outage, if one was under way, is over (logged)."""
        if self._began is None:  # the common case, read without the lock
            return
        with self._lock:
            if self._began is None:
                return
            lasted, failed = self._clock() - self._began, self._failed
            self._began, self._failed, self._unlogged = None, Counter(), 0
            self._log.warning("%s: the server answers again after %.1f s; failed meanwhile: "
                              "%s", self.name, lasted, _counts(failed))

    def pool_filter(self, pool_name: str) -> logging.Filter:
        """A filter for :data:`POOL_LOGGER` that counts the pool ``pool_name``'s failed
        connection attempts here instead of letting each through (its other lines pass)."""
        outage = self

        class _PoolFailures(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                args = record.args if isinstance(record.args, tuple) else ()
                if record.msg not in _POOL_FAILURES or not args or args[0] != pool_name:
                    return True
                if record.msg == _POOL_FAILURES[0]:
                    outage.failed("connection attempt", args[1])
                return False

        return _PoolFailures()


def _counts(failed: Counter[str]) -> str:
    return ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for what, n in failed.items())
