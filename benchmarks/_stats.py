"""Small helpers every benchmark uses to measure and print."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples_us: Sequence[float]) -> str:
    median = statistics.median(samples_us)
    return (f"median {median:8.1f} µs   p90 {percentile(samples_us, 0.9):8.1f} µs   "
            f"p99 {percentile(samples_us, 0.99):8.1f} µs   (n={len(samples_us)})")


def quietest(blocks: Sequence[Sequence[float]]) -> float:
    """The lowest block median: interference from other load only ever adds time."""
    return min(statistics.median(b) for b in blocks)


def row(label: str, text: str) -> None:
    print(f"  {label:<44} {text}", flush=True)
