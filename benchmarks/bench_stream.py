"""How soon the first piece of a streamed answer reaches its sink.

``python -m benchmarks.bench_stream`` (also in ``make bench``). Two figures:

1. A fake model that writes one word every 40 ms (about the embedded model's
   25 tokens/s) answers through ``Runtime.respond(on_answer=...)`` with every
   record committed to a SQLite ledger: the time from the model call's start
   to the first delta at the sink, and what overt adds to the model's own 40 ms.
2. The embedded model (``local``), when its weights are prepared (``overt model
   prepare``; skipped with a message otherwise): for a question it answers
   without a tool and one that needs a tool, the time from the first token
   llama.cpp samples in the answering call to the first delta at the sink
   (the target: within 1.5 s); from the start of the answering model call
   (its prompt's prefill included: the stricter reading of "within 1.5 s of
   the model starting to answer"); and from the turn's start. The first
   token's time is read by wrapping ``llama_sampling.sample_tokens``, and the
   call's start by wrapping the model's ``complete_stream``, in this script only.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._stats import percentile, row
from overt.engine.answer_stream import AnswerDelta, AnswerEvent
from overt.errors import ModelAssetError
from overt.ledger import open_ledger
from overt.models.base import TextSink
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from overt.types import IncomingMessage, ModelRequest, ModelResponse

PACE_S = 0.040
TURNS = 30
ANSWER = "Your usage today is 735 tokens over 3 turns, at no cost on the local model."
TARGET_S = 1.5


class _Clocked:
    """A streaming model that notes when each call starts."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner, self.name, self.started = inner, inner.name, 0.0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        self.started = time.perf_counter()
        return await self.inner.complete_stream(request, on_text)


def _first_delta(events: list[float]) -> Any:
    def sink(event: AnswerEvent) -> None:
        if isinstance(event, AnswerDelta) and not events:
            events.append(time.perf_counter())
    return sink


def paced() -> dict[str, float]:
    model = _Clocked(ScriptedModel([ANSWER] * TURNS, stream_pace_s=PACE_S))
    samples: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(model=model, ledger=open_ledger(str(Path(tmp) / "l.db")))

        async def go() -> None:
            for n in range(TURNS):
                first: list[float] = []
                await runtime.respond(IncomingMessage("cli", "usage?", {"session_id": f"s{n}"}),
                                      history=(), on_answer=_first_delta(first))
                samples.append((first[0] - model.started) * 1000)
            await runtime.close()
        asyncio.run(go())
    p50, p95 = percentile(samples, 0.5), percentile(samples, 0.95)
    row(f"fake model, a word every {PACE_S * 1000:g} ms: first delta",
        f"p50 {p50:6.1f} ms   p95 {p95:6.1f} ms   (overt adds {p50 - PACE_S * 1000:.1f} ms "
        f"at p50; n={TURNS})")
    return {"fake_first_delta_p50_ms": p50, "fake_first_delta_p95_ms": p95}


def local() -> dict[str, float]:
    from overt.models import llama_sampling
    from overt.models.local import LocalModel

    try:
        model = LocalModel.from_asset("default", download=False)
    except ModelAssetError as exc:
        row("local model", f"skipped: {exc} (run `overt model prepare`)")
        return {}
    model.load()
    sampled: list[float] = []  # when each decoding step sampled its first token
    calls: list[float] = []  # when each model call began
    sample_tokens = llama_sampling.sample_tokens
    complete_stream = model.complete_stream

    async def timed_call(*args: Any, **kwargs: Any) -> Any:
        calls.append(time.perf_counter())
        return await complete_stream(*args, **kwargs)
    model.complete_stream = timed_call  # type: ignore[method-assign]

    def timed(*args: Any, **kwargs: Any) -> Iterator[int]:
        first = True
        for token in sample_tokens(*args, **kwargs):
            if first:
                sampled.append(time.perf_counter())
                first = False
            yield token
    llama_sampling.sample_tokens = timed  # type: ignore[assignment]
    try:
        return _timed_answers(model, sampled, calls)
    finally:
        llama_sampling.sample_tokens = sample_tokens


def _timed_answers(model: Any, sampled: list[float], calls: list[float]) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(model=model, ledger=open_ledger(str(Path(tmp) / "l.db")))
        for label, question in (("no tool", "Say hello to the operator in one sentence."),
                                ("a tool", "What is my token usage today?")):
            first: list[float] = []
            sampled.clear()
            calls.clear()

            async def ask(question: str = question, first: list[float] = first,
                          session: str = label) -> Any:
                started = time.perf_counter()
                result = await runtime.respond(
                    IncomingMessage("cli", question, {"session_id": session}), history=(),
                    on_answer=_first_delta(first))
                return started, result
            started, result = asyncio.run(ask())
            if not first:
                row(f"local, {label}", f"no answer text streamed ({result.error})")
                continue
            answering = max(t for t in sampled if t <= first[0])
            on_screen = first[0] - answering
            call = first[0] - max(t for t in calls if t <= first[0])
            verdict = "ok" if on_screen <= TARGET_S else "MISSED"
            row(f"local, {label}: first token -> on screen",
                f"{on_screen * 1000:7.1f} ms  (target {TARGET_S:g} s: {verdict}); turn start -> "
                f"on screen {first[0] - started:5.2f} s; tools {result.tools_used}")
            verdict = "ok" if call <= TARGET_S else "MISSED"
            row(f"local, {label}: answering call start -> on screen",
                f"{call * 1000:7.1f} ms  (target {TARGET_S:g} s: {verdict}; the call's prompt "
                "prefilled, then its first token)")
            key = label.replace(" ", "_")
            figures[f"local_{key}_first_token_to_screen_ms"] = on_screen * 1000
            figures[f"local_{key}_turn_to_screen_s"] = first[0] - started
            figures[f"local_{key}_call_to_screen_ms"] = call * 1000
        asyncio.run(runtime.close())
    return figures


def main() -> dict[str, float]:
    print("answer streaming")
    return {**paced(), **local()}


if __name__ == "__main__":
    main()
