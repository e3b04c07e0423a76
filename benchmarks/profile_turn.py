"""Where a continuing conversation's turn spends its time, by the session's length.

Not part of ``make bench`` (it runs cProfile). One session is continued turn after
turn through :meth:`overt.runtime.Runtime.respond`, as ``overt serve`` continues
one (the history read back by the runtime's reader, fitted into the model's window),
with a model that answers at once and states a 32,768-token window (a message of
about 100 characters, an answer of about 400, as ``bench_load`` sends: the window
is full from about 170 turns on). At each length asked for, the next ``--turns``
turns are timed (wall, and this process's CPU time in all its threads: the
ledger's writer too), then profiled; the functions whose own time is largest are
printed (``--top 0``: no profile), so a cost that grows with the session shows as a
row that grows.

    python -m benchmarks.profile_turn --backend sqlite --at 10 300 1000
    python -m benchmarks.profile_turn --backend postgres   # at OVERT_BENCH_PG
    python -m benchmarks.profile_turn --no-request-bodies  # the requests as sent not recorded
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from benchmarks._pg import scratch_schema, unreachable
from benchmarks._stats import row
from overt.ledger import open_ledger
from overt.runtime import Runtime
from overt.types import IncomingMessage, ModelRequest, ModelResponse, Usage

ANSWER = "Here is what I found about that, in a sentence or two, for the bench. " * 5
QUESTION = (" Could you look at what changed on the host since the last deploy and tell "
            "me whether it matters?")
SESSION = "profiled"


class Instant:
    """Answers at once and states a 32,768-token window (as ``bench_load``'s)."""

    name = "instant"
    context_window = 32_768

    def __init__(self) -> None:
        self.sent = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.sent = len(request.messages)
        return ModelResponse(f"{len(request.messages)} messages. {ANSWER}", (),
                             Usage(10, 1), self.name)


async def _turn(runtime: Runtime, n: int) -> float:
    start = time.perf_counter()
    result = await runtime.respond(IncomingMessage("http", f"message {n}.{QUESTION}", {}),
                                   session_id=SESSION)
    if result.error is not None:
        raise RuntimeError(f"turn {n} failed: {result.error}")
    return (time.perf_counter() - start) * 1000


async def _run(url: str, lengths: list[int], turns: int, top: int, requests: bool) -> None:
    model = Instant()
    runtime = Runtime(model=model, ledger=open_ledger(url))
    runtime.engine.record_requests = requests
    done = 0
    try:
        for length in sorted(lengths):
            while done < length:
                await _turn(runtime, done)
                done += 1
            cpu = time.process_time()
            timed = [await _turn(runtime, done + k) for k in range(turns)]
            cpu_ms = (time.process_time() - cpu) * 1000 / turns
            sent = model.sent
            done += turns
            profile = cProfile.Profile()
            if top:
                profile.enable()
                for k in range(turns):
                    await _turn(runtime, done + k)
                profile.disable()
                done += turns
            row(f"session length {length}",
                f"median {statistics.median(timed):6.2f} ms a turn   "
                f"max {max(timed):6.2f} ms   CPU {cpu_ms:5.2f} ms a turn (all threads)   "
                f"({sent} messages sent to the model)")
            if top:
                pstats.Stats(profile).sort_stats("tottime").print_stats(top)
    finally:
        await runtime.close()


def main(backend: str, lengths: list[int], turns: int, top: int, requests: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        if backend == "postgres":
            if (why := unreachable()) is not None:
                print(f"postgres: skipped, {why}")
                return
            url, _ = stack.enter_context(scratch_schema("profile_turn"))
        else:
            url = str(Path(tmp) / "ledger.db")
        print(f"{backend}: one session continued; {turns} turns timed, then {turns} "
              f"profiled, at each length")
        asyncio.run(_run(url, lengths, turns, top, requests))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_turn")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--at", type=int, nargs="+", default=[10, 300, 1000])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--top", type=int, default=15,
                        help="how many functions to print (0: time only, no profile)")
    parser.add_argument("--no-request-bodies", action="store_true",
                        help="record no request as sent (what recording them costs)")
    args = parser.parse_args()
    main(args.backend, args.at, args.turns, args.top, not args.no_request_bodies)
