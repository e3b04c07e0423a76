"""A verify reports its progress, on both backends: counts that rise to the total."""

from __future__ import annotations

import threading
from typing import Any

from overt.events import TurnStarted
from overt.ledger.canonical import digest_text
from tests.conftest import run


def _fill(ledger: Any, n: int) -> None:
    for i in range(n):
        event = TurnStarted(turn_id=f"T{i}", session_id="S-1", source="cli",
                            caller_session_id="cli:S-1", message_digest=digest_text(f"m{i}"),
                            model="m", route="default", max_tool_calls=5, actor="operator:default")
        run(ledger.record([event], {digest_text(f"m{i}"): f"m{i}"}))


def test_a_verify_reports_rising_counts_that_end_at_the_total(ledger: Any) -> None:
    _fill(ledger, 150)
    seen: list[tuple[int, int]] = []
    report = run(ledger.verify(progress=lambda checked, total: seen.append((checked, total))))
    assert report.ok and report.entries == 150
    totals = {total for _, total in seen}
    # the chain, its trail index, the bodies, and the chain again for what it points to
    assert totals == {150 + 150 + 150 + 150}
    counts = [checked for checked, _ in seen]
    assert counts == sorted(set(counts)) and len(counts) >= 50
    assert seen[-1] == (600, 600)


def test_a_verify_of_the_chain_alone_counts_only_the_chain(ledger: Any) -> None:
    _fill(ledger, 30)
    seen: list[tuple[int, int]] = []
    report = run(ledger.verify(check_content=False, check_index=False,
                               progress=lambda checked, total: seen.append((checked, total))))
    assert report.ok and [c for c, _ in seen] == list(range(1, 31))
    assert {t for _, t in seen} == {30}


def test_progress_is_reported_off_the_event_loop_thread(ledger: Any) -> None:
    _fill(ledger, 3)
    threads: set[int] = set()
    run(ledger.verify(progress=lambda checked, total: threads.add(threading.get_ident())))
    assert threads and threading.get_ident() not in threads

