"""Where a continuing conversation's turn spends its time, by the session's length.

Not part of ``make bench`` (it runs cProfile). ``--sessions`` sessions (1 by default)
are continued turn after turn through :meth:`overt.runtime.Runtime.respond`, as
``overt serve`` continues them (the history read back by the runtime's reader,
fitted into the model's window), each step one turn of every session at once, with
a model that answers at once and states a 32,768-token window (a message of about
100 characters, an answer of about 400, as ``bench_load`` sends: the window is full
from about 170 turns on). At each length asked for, the next ``--turns`` steps are
timed (wall; this process's CPU time in all its threads, the ledger's writer too;
and the event loop's own), then profiled by the event loop's CPU time (a wall-clock
profile charges a function with the time its thread waits for the GIL); the
functions whose own time is largest are printed (``--top 0``: no profile), so a
cost that grows with the session shows as a row that grows. Fifty sessions at once
show what one does not: one session's objects stay in the processor's caches, fifty
sessions' do not, and a walk over a session's turns costs several times more.

    python -m benchmarks.profile_turn --backend sqlite --at 10 300 1000
    python -m benchmarks.profile_turn --sessions 50 --at 10 300 --turns 10
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


async def _turn(runtime: Runtime, n: int, session: str = SESSION) -> float:
    start = time.perf_counter()
    result = await runtime.respond(IncomingMessage("http", f"message {n}.{QUESTION}", {}),
                                   session_id=session)
    if result.error is not None:
        raise RuntimeError(f"turn {n} failed: {result.error}")
    return (time.perf_counter() - start) * 1000


async def _step(runtime: Runtime, n: int, sessions: int) -> list[float]:
    """Turn ``n`` of each session, at once."""
    if sessions == 1:
        return [await _turn(runtime, n)]
    return list(await asyncio.gather(*(_turn(runtime, n, f"{SESSION}-{s}")
                                       for s in range(sessions))))


async def _run(url: str, lengths: list[int], turns: int, top: int, requests: bool,
               sessions: int) -> None:
    model = Instant()
    runtime = Runtime(model=model, ledger=open_ledger(url))
    runtime.engine.record_requests = requests
    done = 0
    try:
        for length in sorted(lengths):
            while done < length:
                await _step(runtime, done, sessions)
                done += 1
            cpu, loop_cpu = time.process_time(), time.thread_time()
            timed = [ms for k in range(turns) for ms in await _step(runtime, done + k, sessions)]
            cpu_ms = (time.process_time() - cpu) * 1000 / len(timed)
            loop_ms = (time.thread_time() - loop_cpu) * 1000 / len(timed)
            sent = model.sent
            done += turns
            profile = cProfile.Profile(time.thread_time)
            if top:
                profile.enable()
                for k in range(turns):
                    await _step(runtime, done + k, sessions)
                profile.disable()
                done += turns
            row(f"session length {length}",
                f"median {statistics.median(timed):6.2f} ms a turn   "
                f"max {max(timed):6.2f} ms   CPU {cpu_ms:5.2f} ms a turn (all threads), "
                f"{loop_ms:5.2f} ms the event loop's   ({sent} messages sent to the model)")
            if top:
                pstats.Stats(profile).sort_stats("tottime").print_stats(top)
    finally:
        await runtime.close()


def main(backend: str, lengths: list[int], turns: int, top: int, requests: bool = True,
         sessions: int = 1) -> None:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        if backend == "postgres":
            if (why := unreachable()) is not None:
                print(f"postgres: skipped, {why}")
                return
            url, _ = stack.enter_context(scratch_schema("profile_turn"))
        else:
            url = str(Path(tmp) / "ledger.db")
        print(f"{backend}: {sessions} session{'s' if sessions > 1 else ''} continued at "
              f"once; {turns} steps timed, then {turns} profiled, at each length")
        asyncio.run(_run(url, lengths, turns, top, requests, sessions))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_turn")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--at", type=int, nargs="+", default=[10, 300, 1000])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--top", type=int, default=15,
                        help="how many functions to print (0: time only, no profile)")
    parser.add_argument("--no-request-bodies", action="store_true",
                        help="record no request as sent (what recording them costs)")
    parser.add_argument("--sessions", type=int, default=1,
                        help="sessions continued at once (each step a turn of each)")
    args = parser.parse_args()
    main(args.backend, args.at, args.turns, args.top, not args.no_request_bodies,
         args.sessions)
