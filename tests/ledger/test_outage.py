"""An outage's lines: its first failure in full, one summary per period while it lasts
counting every failure since, and its end with the count of each kind."""

from __future__ import annotations

import logging

import pytest

from overt.ledger.outage import POOL_LOGGER, Outage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_repeats_are_counted_into_one_line_per_period_and_the_end_says_how_many(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    outage = Outage("ledger pg", logging.getLogger("tests.outage"), summary_s=60.0,
                    clock=clock)
    caplog.set_level(logging.WARNING, "tests.outage")
    outage.answered()  # no outage: nothing to say
    assert caplog.records == []
    for n in range(50):  # 50 appends in 25 s
        outage.failed("append", f"connection refused\n\tIs the server running? ({n})")
        clock.now += 0.5
    assert [r.getMessage() for r in caplog.records] == [
        "ledger pg: the server is out of reach: append failed: connection refused Is the "
        "server running? (0) (further failures are counted, one line per 60 s, until it "
        "answers)"]
    clock.now += 40  # 65 s in: the next failure brings the summary
    outage.failed("read", "pool timeout")
    assert caplog.records[-1].getMessage() == (
        "ledger pg: still out of reach after 65 s: 50 more failures (50 appends, 1 read); "
        "the latest: pool timeout")
    outage.failed("read", "pool timeout")  # within the period: counted, not logged
    clock.now += 5
    outage.answered()
    outage.answered()
    assert [r.getMessage() for r in caplog.records][2:] == [
        "ledger pg: the server answers again after 70.0 s; failed meanwhile: 50 appends, "
        "2 reads"]
    assert not outage.ongoing


def test_the_pools_failed_attempts_are_counted_and_its_other_lines_pass(
        caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("ledger pg", logging.getLogger("tests.outage"))
    pool_log = logging.getLogger(POOL_LOGGER)
    mine = outage.pool_filter("overt-a")
    pool_log.addFilter(mine)
    caplog.set_level(logging.WARNING)
    try:
        for _ in range(3):
            pool_log.warning("error connecting in %r: %s", "overt-a", "refused")
            pool_log.warning("reconnection attempt in pool %r failed after %s sec",
                             "overt-a", 1.0)
        pool_log.warning("error connecting in %r: %s", "someone-else", "refused")
        pool_log.warning("discarding broken connection: %s", "<conn>")
    finally:
        pool_log.removeFilter(mine)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("tests.outage", "ledger pg: the server is out of reach: connection attempt failed: "
                         "refused (further failures are counted, one line per 60 s, until "
                         "it answers)"),
        (POOL_LOGGER, "error connecting in 'someone-else': refused"),
        (POOL_LOGGER, "discarding broken connection: <conn>")]
    outage.answered()
    assert caplog.records[-1].getMessage().endswith("failed meanwhile: 3 connection attempts")
