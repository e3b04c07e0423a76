"""How long the embedded model takes to answer a question that needs a tool.

Two figures, the issue's targets beside them:

- **cold process**: ``overt ask QUESTION`` as a new process, timed from spawn
  to exit (Python start-up, loading the weights, the prompt prefix's KV state
  from the prefix cache, the tool round and the answer). The first run after
  a change of prompt, tools or weights prefills the prefix and writes the
  cache; it is shown on its own line, and the median is over the runs after
  it. Target: median at most 5 s.
- **loaded model** (``overt chat`` / ``overt serve``): the same question asked
  again in one process whose model is loaded. Target: median at most 3 s.

Every run uses its own ledger in a temporary directory. Figures on a shared
2-core machine swing with other load; the load average is printed with them.
Skips, saying so, when the embedded model is not prepared
(``overt model prepare local``).

Run alone: ``python -m benchmarks.bench_answer [RUNS] [MODEL]`` (default 3 runs of
``local``; ``local:quality`` times the 1.5B model).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._stats import row

QUESTION = "How many tokens have I used today?"
RUNS = 3
MODEL = "local"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} CPUs"


def _prepared(spec: str) -> bool:
    from overt.models.assets import ASSETS, is_prepared

    return is_prepared(ASSETS[spec], os.environ.get("OVERT_CACHE_DIR") or None)


def _cold(directory: Path, n: int, spec: str) -> float:
    env = {**os.environ, "OVERT_DB": str(directory / f"cold-{n}.db")}
    src = Path(__file__).resolve().parent.parent / "src"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), env.get("PYTHONPATH")) if p)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "overt.cli", "ask", "--model", spec, QUESTION],
                          env=env,
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"overt ask failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed


async def _warm(directory: Path, runs: int, spec: str) -> list[float]:
    from overt import IncomingMessage
    from overt.ledger import open_ledger
    from overt.models.local import LocalModel
    from overt.runtime import Runtime

    model = LocalModel.from_asset(spec, cache_dir=os.environ.get("OVERT_CACHE_DIR"))
    model.load()
    runtime = Runtime(model=model, ledger=open_ledger(str(directory / "warm.db")))
    samples = []
    try:
        for n in range(runs + 1):  # the first loads the prefix: not counted
            start = time.perf_counter()
            await runtime.respond(IncomingMessage("cli", QUESTION, {"session_id": f"w{n}"}),
                                  history=())
            if n:
                samples.append(time.perf_counter() - start)
    finally:
        await runtime.close()
    return samples


def _spread(samples: list[float]) -> str:
    return (f"median {statistics.median(samples):5.1f} s   min {min(samples):5.1f} s   "
            f"max {max(samples):5.1f} s   (n={len(samples)})")


def main(runs: int = RUNS, spec: str = MODEL) -> None:
    print(f"answer: a tool question to the embedded model ({spec})")
    if not _prepared(spec):
        print(f"  skipped: the embedded model is not prepared; run `overt model prepare {spec}`")
        return
    row("machine", _load())
    with tempfile.TemporaryDirectory(prefix="overt-bench-answer-") as tmp:
        directory = Path(tmp)
        first = _cold(directory, 0, spec)
        row("cold process, first (may build the cache)", f"{first:5.1f} s")
        cold = [_cold(directory, n, spec) for n in range(1, runs + 1)]
        row("cold process `overt ask` (target ≤ 5 s)", _spread(cold))
        warm = asyncio.run(_warm(directory, runs, spec))
        row("loaded model, chat/serve (target ≤ 3 s)", _spread(warm))
    row("machine, after", _load())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS,
         sys.argv[2] if len(sys.argv) > 2 else MODEL)
