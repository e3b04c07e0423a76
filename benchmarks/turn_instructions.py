"""What recording the request as sent costs a turn, in instructions (valgrind).

Wall and CPU times move with whatever else the machine runs; an instruction count
does not. One session is continued as ``profile_turn`` continues it (a model that
answers at once, a 32,768-token window), in a process run under
``valgrind --tool=callgrind`` (every thread counted: the ledger's writer too), once
for ``--warm`` turns and once for ``--warm`` + ``--turns``; the difference divided by
``--turns`` is one turn's instructions at that session length. Done with the
requests as sent recorded (the default) and without, it prints both and the
difference. Not part of ``make bench`` (it takes minutes: valgrind runs Python about
fifty times slower).

    python -m benchmarks.turn_instructions --warm 200 --turns 200
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._stats import row


async def _session(url: str, turns: int, requests: bool) -> None:
    from benchmarks.profile_turn import Instant, _turn
    from overt.ledger import open_ledger
    from overt.runtime import Runtime

    runtime = Runtime(model=Instant(), ledger=open_ledger(url))
    runtime.engine.record_requests = requests
    try:
        for n in range(turns):
            await _turn(runtime, n)
    finally:
        await runtime.close()


def _count(turns: int, requests: bool) -> int:
    """Instructions of a process that continues one session for ``turns`` turns."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             "-m", "benchmarks.turn_instructions", "--run", str(turns),
             *([] if requests else ["--no-request-bodies"]), "--ledger",
             str(Path(tmp) / "ledger.db")],
            capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no count: {done.stderr[-500:]}")
    return int(found.group(1))


def main(warm: int, turns: int) -> None:
    if shutil.which("valgrind") is None:
        print("turn_instructions: skipped, valgrind is not installed")
        return
    print(f"one session continued; a turn's instructions from turn {warm} to {warm + turns}")
    per_turn = {}
    for requests in (False, True):
        per_turn[requests] = (_count(warm + turns, requests) - _count(warm, requests)) // turns
        row("requests as sent " + ("recorded" if requests else "not recorded"),
            f"{per_turn[requests]:,} instructions a turn")
    row("recording them costs", f"{per_turn[True] / per_turn[False] - 1:+.1%}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.turn_instructions")
    parser.add_argument("--warm", type=int, default=200)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--no-request-bodies", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:
        asyncio.run(_session(args.ledger, args.run, not args.no_request_bodies))
    else:
        main(args.warm, args.turns)
