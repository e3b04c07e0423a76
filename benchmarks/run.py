"""Runs every benchmark and prints its figures: ``make bench``."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import (
    bench_answer,
    bench_approvals,
    bench_bundle,
    bench_cockpit,
    bench_hooks,
    bench_ledger,
    bench_load,
    bench_machine,
    bench_memory,
    bench_policy,
    bench_proofs,
    bench_reasoning,
    bench_replay,
    bench_router,
    bench_sessions,
    bench_stream,
    bench_turn,
    bench_witness,
)


def main() -> None:
    print(f"overt benchmarks on {platform.machine()}, Python {platform.python_version()}, "
          f"{__import__('os').cpu_count()} CPUs\n")
    for module in (bench_machine, bench_turn, bench_ledger, bench_hooks, bench_router, bench_policy,
                   bench_memory, bench_reasoning, bench_sessions, bench_cockpit, bench_load,
                   bench_proofs, bench_bundle, bench_stream, bench_answer, bench_approvals,
                   bench_replay, bench_witness):
        module.main()
        print()


if __name__ == "__main__":
    main()
