"""Running a suite: each case on a fresh, seeded runtime, graded, timed, reported.

Every case gets its own ledger (a SQLite file in a temporary directory),
seeded with the case's data, and a runtime built from the caller's config as
``overt ask`` builds one (same plugins, policy, prompt and limits); the model
is built once and shared, so latency is the latency of a loaded model. The
model is wrapped to see the calls it makes and the results it is sent.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overt.config import Config
from overt.errors import OvertError
from overt.evals.cases import EvalCase
from overt.evals.grade import Call, Grade, grade, substitute
from overt.evals.seed import seed_ledger, seed_past
from overt.events import EvalCompleted
from overt.ledger.canonical import digest_text
from overt.models.base import ListsTools, Model
from overt.policy.actors import Actor
from overt.runtime import Runtime
from overt.types import IncomingMessage, Message, ModelRequest, ModelResponse, ToolSpec


class RecordingModel:
    """``model``, with every request and response of the current case kept."""

    def __init__(self, model: Model) -> None:
        self.inner = model
        self.name = model.name
        self.exchanges: list[tuple[ModelRequest, ModelResponse]] = []

    def __getattr__(self, attr: str) -> Any:  # count_tokens, context_window, max_tokens
        return getattr(self.inner, attr)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.complete(request)
        self.exchanges.append((request, response))
        return response

    def close(self) -> None:
        """Kept open between cases: :func:`run_suite`'s caller closes the model."""

    async def aclose(self) -> None:
        """As :meth:`close` (a runtime closes ``aclose`` first, which would otherwise
        reach the model's own through ``__getattr__``)."""

    def calls(self) -> list[Call]:
        """The tool calls made, each with the result the model was sent for it."""
        results: dict[str, str] = {}
        for request, _ in self.exchanges:
            for message in request.messages:
                if message.role == "tool" and message.tool_call_id:
                    results[message.tool_call_id] = message.content
        by_name: dict[str, list[str]] = {}
        for request, _ in self.exchanges[-1:]:
            for message in request.messages:
                if message.role == "tool":
                    by_name.setdefault(message.name or "", []).append(message.content)
        out = []
        for _, response in self.exchanges:
            for call in response.tool_calls:
                result = results.get(call.id)
                if result is None and by_name.get(call.name):
                    result = by_name[call.name].pop(0)
                out.append(Call(call.name, dict(call.arguments), result))
        return out

    def model_sha256(self) -> str | None:
        for _, response in self.exchanges:
            digest = response.info.get("model_sha256")
            if isinstance(digest, str):
                return digest
        return None


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: EvalCase
    grade: Grade
    answer: str
    calls: tuple[Call, ...]
    latency_ms: float
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.case.id, "category": self.case.category, "lang": self.case.lang,
            "passed": self.grade.passed, "tool_ok": self.grade.tool_ok,
            "args_ok": self.grade.args_ok, "invented": list(self.grade.invented),
            "invented_names": list(self.grade.invented_names),
            "failures": list(self.grade.failures), "answer": self.answer,
            "calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in self.calls],
            "latency_ms": round(self.latency_ms, 1), "error": self.error,
        }


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 for no samples)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(slots=True)
class SuiteResult:
    model: str
    results: list[CaseResult] = field(default_factory=list)
    name: str = ""
    """Which set ran: ``tuning``, ``locked`` or a case file's name."""
    model_sha256: str | None = None
    prompt_sha256: str = ""
    cases_sha256: str = ""

    @property
    def passed(self) -> int:
        return sum(r.grade.passed for r in self.results)

    @property
    def accuracy(self) -> float:
        return self.passed / len(self.results) if self.results else 0.0

    @property
    def invented_figures(self) -> int:
        return sum(len(r.grade.invented) for r in self.results)

    @property
    def invented_names(self) -> int:
        return sum(len(r.grade.invented_names) for r in self.results)

    @property
    def cases_with_invented(self) -> int:
        """Cases whose answer invented a figure or a name."""
        return sum(bool(r.grade.invented or r.grade.invented_names) for r in self.results)

    def latency(self, q: float) -> float:
        return percentile([r.latency_ms for r in self.results], q)

    def summary(self) -> dict[str, Any]:
        categories: dict[str, list[bool]] = {}
        for r in self.results:
            categories.setdefault(r.case.category or "-", []).append(r.grade.passed)
        return {
            "set": self.name, "model": self.model, "model_sha256": self.model_sha256,
            "prompt_sha256": self.prompt_sha256, "cases_sha256": self.cases_sha256,
            "cases": len(self.results), "passed": self.passed,
            "accuracy": round(self.accuracy, 4), "invented_figures": self.invented_figures,
            "invented_names": self.invented_names,
            "cases_with_invented": self.cases_with_invented,
            "errors": sum(r.error is not None for r in self.results),
            "p50_ms": round(self.latency(0.5), 1), "p95_ms": round(self.latency(0.95), 1),
            "by_category": {k: {"cases": len(v), "passed": sum(v)}
                            for k, v in sorted(categories.items())},
        }

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "cases": [r.to_dict() for r in self.results]}

    def event(self) -> EvalCompleted:
        """The suite's record for the ledger."""
        return EvalCompleted(
            suite=self.name, model=self.model, model_sha256=self.model_sha256,
            prompt_sha256=self.prompt_sha256,
            cases_sha256=self.cases_sha256, cases=len(self.results), passed=self.passed,
            invented_figures=self.invented_figures,
            cases_with_invented=self.cases_with_invented,
            p50_ms=round(self.latency(0.5), 1), p95_ms=round(self.latency(0.95), 1),
            errors=sum(r.error is not None for r in self.results))


def cases_digest(cases: Sequence[EvalCase]) -> str:
    """A digest of the cases as run (the file's layout and comments do not count)."""
    return digest_text(json.dumps([_plain(c) for c in cases], sort_keys=True, default=str,
                                  ensure_ascii=False))


_LATER_CHECKS = ("answer_excludes", "answer_figures", "answer_language", "check_names")


def _plain(case: EvalCase) -> dict[str, Any]:
    """The case's fields; a check added to the format later is left out where a case
    does not use it, so that the digest of a suite that uses none stays as it was."""
    return {name: getattr(case, name) for name in case.__slots__
            if name not in _LATER_CHECKS or getattr(case, name)}


def shown_prompt(runtime: Runtime, model: Model) -> str:
    """What the model is shown besides the conversation: the system prompt, then each
    tool it lists, with its name, description and schema (canonical JSON). Its digest
    is the suite's ``prompt_sha256``, so a reworded tool description is on the record
    too. The tools are those offered, as ``model`` lists them when it says how
    (``shown_tools``: the embedded model adds its own ``no_tool`` choice)."""
    specs: Sequence[ToolSpec] = runtime.engine.tools.specs()
    if isinstance(model, ListsTools):
        specs = model.shown_tools(specs)
    tools = [[s.name, s.description, s.input_schema] for s in specs]
    return runtime.engine.system_prompt + "\n" + json.dumps(
        tools, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


async def run_case(case: EvalCase, model: RecordingModel, config: Config,
                   directory: Path) -> tuple[CaseResult, str]:
    """Run ``case`` on a fresh runtime whose ledger lives in ``directory``; returns
    its result and the prompt the model was shown (:func:`shown_prompt`)."""
    model.exchanges.clear()
    await seed_past(directory / "ledger.db", case.seed)
    runtime = Runtime.from_config(config.with_(db=str(directory / "ledger.db"), transcript=""),
                                  model=model)
    try:
        await runtime.start()
        ids = await seed_ledger(runtime.ledger, case.seed,
                                actor=str(Actor.agent(runtime.settings.agent)))
        history = [Message("user" if role == "user" else "assistant", substitute(text, ids))
                   for role, text in case.history]
        question = substitute(case.question, ids)
        session = f"eval:{case.id}"
        started = time.perf_counter()
        error: str | None = None
        try:
            result = await runtime.respond(
                IncomingMessage("cli", question, {"session_id": session}),
                session_id=session, history=history)
            answer, error = result.text, None if result.error is None else str(result.error)
        except OvertError as exc:
            answer, error = "", f"{type(exc).__name__}: {exc}"
        latency = (time.perf_counter() - started) * 1000
        calls = model.calls()
        shown = shown_prompt(runtime, model.inner)
        verdict = grade(case, calls, answer, ids=ids, shown=shown)
        if error is not None and verdict.passed:
            verdict = Grade(False, verdict.tool_ok, verdict.args_ok, verdict.invented,
                            (*verdict.failures, f"turn error: {error}"),
                            verdict.invented_names)
        return CaseResult(case, verdict, answer, tuple(calls), latency, error), shown
    finally:
        await runtime.close()


async def run_suite(model: Model, cases: Sequence[EvalCase], config: Config, *,
                    on_case: Callable[[CaseResult], None] | None = None,
                    name: str = "") -> SuiteResult:
    """Run every case against ``model`` (not closed here), each on its own ledger;
    ``name`` names the set (:attr:`SuiteResult.name`)."""
    recorder = RecordingModel(model)
    suite = SuiteResult(model=model.name, cases_sha256=cases_digest(cases), name=name)
    with tempfile.TemporaryDirectory(prefix="overt-eval-") as tmp:
        for n, case in enumerate(cases):
            directory = Path(tmp) / f"{n:03d}"
            directory.mkdir()
            result, prompt = await run_case(case, recorder, config, directory)
            suite.prompt_sha256 = suite.prompt_sha256 or digest_text(prompt)
            suite.model_sha256 = suite.model_sha256 or recorder.model_sha256()
            suite.results.append(result)
            if on_case is not None:
                on_case(result)
    return suite


def case_line(result: CaseResult) -> str:
    """One line of the per-case report."""
    mark = "PASS" if result.grade.passed else "FAIL"
    tools = ",".join(c.name for c in result.calls) or "-"
    line = f"{mark}  {result.case.id:<34} {tools:<28} {result.latency_ms / 1000:6.1f} s"
    if not result.grade.passed:
        line += "\n      " + "; ".join(result.grade.failures)
    return line


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The suite's figures, for a terminal."""
    lines = [f"set         {summary['set']}"] if summary.get("set") else []
    lines += [
        f"model       {summary['model']}  (sha256 {str(summary['model_sha256'])[:12]})",
        f"prompt      {summary['prompt_sha256'][:19]}",
        f"accuracy    {summary['passed']}/{summary['cases']} = {summary['accuracy']:.1%}",
        f"invented    {summary['invented_figures']} figures, "
        f"{summary.get('invented_names', 0)} names in {summary['cases_with_invented']} cases",
        f"latency     p50 {summary['p50_ms'] / 1000:.1f} s   p95 {summary['p95_ms'] / 1000:.1f} s",
    ]
    if summary.get("errors"):
        lines.append(f"errors      {summary['errors']} turns ended with an error")
    lines += class_lines(summary)
    return lines


def class_lines(summary: Mapping[str, Any]) -> list[str]:
    """The suite's per-class table: right of total, and the share, per class."""
    lines = [f"  {'class':<16} {'right':>9} {'share':>7}"]
    for name, figures in summary["by_category"].items():
        share = figures["passed"] / figures["cases"] if figures["cases"] else 0.0
        lines.append(f"  {name:<16} {figures['passed']:>4}/{figures['cases']:<4} {share:>7.0%}")
    return lines


def sets_lines(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per set run: right of total, accuracy, invented figures, latency."""
    lines = [f"{'set':<10} {'right':>9} {'accuracy':>9} {'invented':>9} "
             f"{'p50':>7} {'p95':>7}"]
    for s in summaries:
        lines.append(
            f"{s['set'] or '-':<10} {s['passed']:>4}/{s['cases']:<4} {s['accuracy']:>9.1%} "
            f"{s['invented_figures']:>9} {s['p50_ms'] / 1000:>6.1f}s {s['p95_ms'] / 1000:>6.1f}s")
    return lines
