"""Reasoning steps, and the trail of a long session.

- steps recorded per second through the ledger: a turn's steps added by
  ``TurnSteps`` (text to the content tier) and committed by the engine's
  ``Recorder``, five steps per commit, on SQLite (and PostgreSQL when one
  answers); the quietest of 8 blocks (target: at most 50 µs per step);
- the audit trail of one session of 10,000 turns and 50,000 steps, on SQLite
  and on PostgreSQL: the one trail query (through the trail index) and its
  assembly into turns, the median of 5 runs (target: under 300 ms on both).
  The ledger holds what turns really record, committed as the engine commits
  them (four times a turn): a message, two inferences, five steps, a tool call
  (started and completed) and a completion, each with its content; one turn in
  six belongs to another session, interleaved.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._pg import scratch_schema, unreachable
from benchmarks._stats import row
from overt.engine.record import Recorder
from overt.events import (
    InferenceRecorded,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnStarted,
)
from overt.ids import new_ulid
from overt.ledger import open_ledger
from overt.reasoning.steps import TurnSteps
from overt.reasoning.trail import build_trail

RECORD_TURNS = 4_000
STEPS_PER_TURN = 5
TRAIL_TURNS = 10_000
OTHER_EVERY = 5  # after every 5 turns of the session, one turn of another session
RUNS = 5
REASONING = ("The user asks for the state of the account.\nPlan:\n1. check_credits\n"
             "2. summarise")


def _record_rate(ledger: Any, turns: int, blocks: int = 8) -> float:
    """Steps committed per second, five per commit, through TurnSteps and a Recorder:
    the quietest of ``blocks`` blocks (other load only ever adds time)."""
    rec = Recorder(ledger, [])

    async def block() -> float:
        # inside one running loop, as the engine flushes: not one asyncio.run per commit
        start = time.perf_counter()
        for _ in range(turns // blocks):
            steps = TurnSteps(rec, new_ulid(), "cli:bench")
            steps.model_reasoning("Checking the balance.", REASONING)  # three steps
            steps.executed("call-1", "check_credits", "ok", "$2.50 remaining")
            steps.failed("model_error: ConnectionError: refused")
            assert len(rec.events) == STEPS_PER_TURN
            await rec.flush()
        return turns // blocks * STEPS_PER_TURN / (time.perf_counter() - start)

    return max(asyncio.run(block()) for _ in range(blocks))


def _inference(turn_id: str, session: str, rec: Recorder, iteration: int, calls: int,
               n: int) -> InferenceRecorded:
    return InferenceRecorded(
        turn_id=turn_id, session_id=session, inference_id=new_ulid(), iteration=iteration,
        model="local", route="default", input_tokens=420, output_tokens=64, cost_usd=0.0,
        duration_ms=812.5, tools_offered=["check_credits", "check_inbox"],
        tool_calls_requested=calls, stop_reason="tool_use" if calls else "end_turn",
        response_digest=rec.content(f'{{"text": "reply {n}.{iteration}"}}'))


def _turn(ledger: Any, rec: Recorder, session: str, n: int) -> int:
    """Record one turn as the engine commits it: before each effect (two model
    calls, one tool call) and at the end, four commits, each step in the commit
    of the record it describes. Returns the steps recorded."""
    steps_recorded = 0

    def commit() -> None:
        nonlocal steps_recorded
        steps_recorded += sum(1 for e in rec.events if e.kind == "reasoning.step")
        ledger.record_sync(rec.events, rec.contents)
        rec.events, rec.contents = [], {}

    turn_id = new_ulid()
    rec.add(TurnStarted(
        turn_id=turn_id, session_id=session, source="cli", caller_session_id=session,
        message_digest=rec.content(f"question {n}: how are my credits?"), model="local",
        route="default", max_tool_calls=5, actor="operator:default"))
    commit()  # before the first model call
    rec.add(_inference(turn_id, session, rec, 0, 1, n))
    steps = TurnSteps(rec, turn_id, session)
    steps.model_reasoning(f"Checking the balance for request {n}.", REASONING)
    call_id = f"call-{n}"
    args = rec.content('{"account": "main"}')
    rec.add(ToolCallStarted(
        turn_id=turn_id, session_id=session, tool_call_id=call_id, tool_name="check_credits",
        triggered_by="cli", caller_session_id=session, args_sha256=args))
    commit()  # the intent, before the tool runs
    rec.add(ToolCallCompleted(
        turn_id=turn_id, session_id=session, tool_call_id=call_id, tool_name="check_credits",
        triggered_by="cli", caller_session_id=session, tool_status="ok",
        tool_duration_ms=3.2, exc_type=None, args_sha256=args,
        result_digest=rec.content(f"${n % 100}.50 remaining")))
    steps.executed(call_id, "check_credits", "ok", f"${n % 100}.50 remaining")
    commit()  # before the second model call
    rec.add(_inference(turn_id, session, rec, 1, 0, n))
    steps.model_reasoning("<think>The balance is known; answer now.</think>"
                          "You have credits left.", "", final=True)
    rec.add(TurnCompleted(
        turn_id=turn_id, session_id=session, status="completed",
        reply_digest=rec.content(f"You have ${n % 100}.50 left."), tools_used=["check_credits"],
        tool_calls=1, model_calls=2, input_tokens=840, output_tokens=128, cost_usd=0.0,
        duration_ms=1650.0))
    commit()
    return steps_recorded


def _fill(ledger: Any, turns: int, session: str, writers: int = 1) -> int:
    """Record ``turns`` turns of ``session`` (and others between); the steps recorded.
    ``writers`` threads record at once (PostgreSQL: a commit is an fsync, and the
    writer's group commit shares it between the turns waiting)."""
    def write(part: int) -> int:
        rec = Recorder(ledger, [])
        steps = 0
        for n in range(part, turns + turns // OTHER_EVERY, writers):
            other = n % (OTHER_EVERY + 1) == OTHER_EVERY
            recorded = _turn(ledger, rec, "cli:other" if other else session, n)
            steps += 0 if other else recorded
        return steps

    with concurrent.futures.ThreadPoolExecutor(writers) as pool:
        return sum(pool.map(write, range(writers)))


def _trail_ms(ledger: Any, session: str) -> tuple[float, list[float], int, int]:
    timings = []
    turns = steps = 0
    for _ in range(RUNS):
        trail = None  # the last run's trail freed first: freeing it is not building this one
        start = time.perf_counter()
        trail = asyncio.run(build_trail(ledger, session_id=session))
        timings.append((time.perf_counter() - start) * 1000)
        turns, steps = len(trail.turns), sum(1 for _ in trail.steps())
    return statistics.median(timings), timings, turns, steps


def main() -> dict[str, float]:
    print("reasoning steps")
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ledger: Any = open_ledger(str(Path(tmp) / "steps.db"))
        figures["sqlite_steps"] = _record_rate(ledger, RECORD_TURNS)
        ledger.close_sync()
        row("SQLite: steps recorded", f"{figures['sqlite_steps']:10,.0f} steps/s "
            f"({1e6 / figures['sqlite_steps']:.1f} µs per step; seed 004: 500 µs, "
            "target <= 50)")

        ledger = open_ledger(str(Path(tmp) / "trail.db"))
        recorded = _fill(ledger, TRAIL_TURNS, "cli:audited")
        median, runs, turns, steps = _trail_ms(ledger, "cli:audited")
        figures["sqlite_trail_ms"] = median
        ledger.close_sync()
        row(f"SQLite: trail of {turns:,} turns, {steps:,} steps",
            f"median {median:6.1f} ms of {RUNS}, best {min(runs):6.1f} ms (target < 300 ms)")
        row("  each run", ", ".join(f"{t:.1f}" for t in runs) + f" ms ({recorded:,} recorded)")

    if (why := unreachable()) is not None:  # the SQLite figures stand alone
        row("PostgreSQL: steps recorded", f"skipped: {why}")
        return figures
    with scratch_schema("reasoning") as (url, _):
        pg: Any = open_ledger(url)
        figures["pg_steps"] = _record_rate(pg, RECORD_TURNS // 4)
        pg.close_sync()
        row("PostgreSQL: steps recorded, 1 writer",
            f"{figures['pg_steps']:10,.0f} steps/s (a commit each 5: fsync-bound)")
        pg = open_ledger(url)
        recorded = _fill(pg, TRAIL_TURNS, "cli:audited", writers=32)
        median, runs, turns, steps = _trail_ms(pg, "cli:audited")
        figures["pg_trail_ms"] = median
        pg.close_sync()
        row(f"PostgreSQL: trail of {turns:,} turns, {steps:,} steps",
            f"median {median:6.1f} ms of {RUNS}, best {min(runs):6.1f} ms (target < 300 ms)")
        row("  each run", ", ".join(f"{t:.1f}" for t in runs) + f" ms ({recorded:,} recorded)")
    return figures


if __name__ == "__main__":
    main()
