"""Where the time of one tool question goes, with the embedded model loaded.

Not part of ``make bench`` (it patches the model's llama.cpp handle to time each
evaluation). For each model call of the turn: the prompt's tokens, where its
system turn came from (``disk``, ``held``, ``prefilled``), the tokens prefilled
(evaluated in batches) and generated (one at a time), and the milliseconds of
each; "outside the model" is the rest of the turn (the tool, the ledger).

Run: ``python -m benchmarks.profile_answer [RUNS] [QUESTION]`` (the model must be prepared;
``OVERT_BENCH_MODEL=local:quality`` profiles the 1.5B model).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUESTION = "How many tokens have I used today?"


class _Calls:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def start(self) -> None:
        self.calls.append({"prefill": [0, 0.0], "generate": [0, 0.0], "ms": 0.0})

    def evaluated(self, n: int, seconds: float) -> None:
        kind = "prefill" if n > 1 else "generate"
        self.calls[-1][kind][0] += n
        self.calls[-1][kind][1] += seconds * 1000


def _instrument(model: Any, calls: _Calls) -> None:
    llm = model._llm
    evaluate = llm.eval

    def timed_eval(tokens: list[int]) -> None:
        start = time.perf_counter()
        evaluate(tokens)
        calls.evaluated(len(tokens), time.perf_counter() - start)

    llm.eval = timed_eval
    complete = model._complete_sync

    def timed_complete(request: Any, *args: Any, **kwargs: Any) -> Any:
        calls.start()
        start = time.perf_counter()
        response = complete(request, *args, **kwargs)
        calls.calls[-1].update(ms=(time.perf_counter() - start) * 1000,
                               prompt=response.usage.input_tokens,
                               prefix=response.info.get("prefix"),
                               calls=[c.name for c in response.tool_calls])
        return response

    model._complete_sync = timed_complete


async def _main(runs: int, question: str) -> None:
    from overt import IncomingMessage
    from overt.ledger import open_ledger
    from overt.models.local import LocalModel
    from overt.runtime import Runtime

    start = time.perf_counter()
    model = LocalModel.from_asset(os.environ.get("OVERT_BENCH_MODEL", "local"),
                                  cache_dir=os.environ.get("OVERT_CACHE_DIR"))
    model.load()
    print(f"load: {(time.perf_counter() - start) * 1000:.0f} ms")
    calls = _Calls()
    _instrument(model, calls)
    with tempfile.TemporaryDirectory(prefix="overt-profile-") as tmp:
        runtime = Runtime(model=model, ledger=open_ledger(str(Path(tmp) / "p.db")))
        try:
            for n in range(runs + 1):  # the first loads the prefix cache
                calls.calls.clear()
                start = time.perf_counter()
                result = await runtime.respond(
                    IncomingMessage("cli", question, {"session_id": f"p{n}"}), history=())
                total = (time.perf_counter() - start) * 1000
                one, _, _ = os.getloadavg()
                print(f"run {n}{' (warm-up)' if n == 0 else ''}: {total:.0f} ms, "
                      f"load {one:.2f}: {result.text!r}")
                for c in calls.calls:
                    pre, gen = c["prefill"], c["generate"]
                    print(f"  call: prompt {c.get('prompt')} tokens (system turn: "
                          f"{c.get('prefix')}); prefill {pre[0]} tokens {pre[1]:.0f} ms; "
                          f"generate {gen[0]} tokens {gen[1]:.0f} ms; total {c['ms']:.0f} ms"
                          f"{'; calls ' + ', '.join(c['calls']) if c.get('calls') else ''}")
                print(f"  outside the model: {total - sum(c['ms'] for c in calls.calls):.0f} ms")
        finally:
            await runtime.close()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1]) if len(sys.argv) > 1 else 2,
                      sys.argv[2] if len(sys.argv) > 2 else QUESTION))
