"""``overt eval --model SPEC [--set NAME | --cases FILE] [--local-policy P] [--json OUT]``.

By default every set shipped with overt runs (:mod:`overt.evals.sets`: the tuning
set, then the locked set); ``--set`` picks some, ``--cases`` runs a file instead.
Each case runs on a fresh, seeded ledger (see :mod:`overt.evals`). For each set the
per-case lines (never for the locked set: its cases are not read while tuning), then
accuracy, invented figures, p50/p95 latency and the per-class table are printed, and
at the end one line per set. The whole result is written as JSON with ``--json``
(``{"sets": {NAME: {"summary": ..., "cases": [...]}}}``), and an ``eval.completed``
entry per set (set, model, model digest, prompt digest, cases digest, figures) goes
to the configured ledger unless ``--no-record``.

Attached by :mod:`overt.cli.main`: :func:`add_parser` adds the command,
:func:`run` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

from overt.cli import flags
from overt.config import Config, routing
from overt.evals.cases import EvalCase, load_cases
from overt.evals.runner import (
    CaseResult,
    SuiteResult,
    case_line,
    run_suite,
    sets_lines,
    summary_lines,
)
from overt.evals.sets import FILES, LOCKED, set_path, shipped_sets
from overt.hooks.manager import PluginHost
from overt.ledger import open_ledger
from overt.models.base import Model
from overt.models.local_policy import LocalPolicy
from overt.models.options import ModelOptions
from overt.models.resolve import ModelCatalog

COMMANDS = ("eval",)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``eval`` to ``sub`` (the top-level commands)."""
    p = sub.add_parser("eval", help="run the eval suite of operator questions against a model")
    p.add_argument("--model", metavar="SPEC",
                   help="the model to evaluate (local, local:small, openai:NAME, ...; "
                        "default: the configured model)")
    p.add_argument("--set", action="append", default=[], choices=tuple(FILES),
                   dest="sets", metavar="NAME",
                   help="run this shipped set: tuning or locked (repeatable; default: "
                        "every shipped set)")
    p.add_argument("--cases", metavar="FILE",
                   help="a case file, JSON or TOML, run instead of the shipped sets")
    p.add_argument("--json", metavar="OUT", help="write the full result as JSON to OUT")
    p.add_argument("--case", action="append", default=[], metavar="ID", type=flags.case_id,
                   help="run only this case (repeatable; a prefix selects several)")
    p.add_argument("--no-record", action="store_true",
                   help="do not write the eval.completed entry to the ledger")
    p.add_argument("--local-policy", metavar="on|off|PARTS", type=_policy,
                   help="the embedded model's heuristics for this run: on (all), off (none) or "
                        "the parts to keep, comma-separated (default: [providers.local] "
                        "local_policy, else on)")


def _policy(value: str) -> str:
    """``--local-policy``'s value, checked as the command line is read."""
    try:
        LocalPolicy.of(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _progress(line: str) -> None:
    print(f"overt: {line}", file=sys.stderr, flush=True)


def _model(config: Config) -> tuple[Model, ModelCatalog]:
    plugins = PluginHost.load(config.plugins_enabled, config.plugins_disabled,
                              config.plugin_files)
    catalog = ModelCatalog(plugins.models(), options=ModelOptions(
        cache_dir=config.cache_dir, progress=_progress, provider_settings=config.providers))
    routing.add_aliases(config, catalog)
    return routing.route_model(config, catalog), catalog


async def _close(model: Model, catalog: ModelCatalog) -> None:
    for built in {id(m): m for m in (model, *catalog.built())}.values():
        aclose = getattr(built, "aclose", None)
        if aclose is not None:
            await aclose()
        elif (close := getattr(built, "close", None)) is not None:
            close()


async def _record(config: Config, suites: list[SuiteResult]) -> None:
    ledger = open_ledger(config.db, read_only=config.read_only,
                         create=config.create_ledger)
    try:
        await ledger.record([suite.event() for suite in suites])
    finally:
        await ledger.close()


def _sets(args: argparse.Namespace) -> dict[str, list[EvalCase]]:
    """The cases to run, by set name: ``--cases``'s file (named by its stem), else the
    sets ``--set`` names, else every shipped one; each narrowed by ``--case``."""
    if args.cases:
        files = {Path(args.cases).stem: Path(args.cases)}
    elif args.sets:
        files = {name: set_path(name) for name in dict.fromkeys(args.sets)}
    else:
        files = shipped_sets()
    out: dict[str, list[EvalCase]] = {}
    for name, path in files.items():
        cases = load_cases(path)
        if args.case:
            cases = [c for c in cases if any(c.id.startswith(p) for p in args.case)]
        if cases:
            out[name] = cases
    return out


def _case_printer(name: str, total: int) -> Callable[[CaseResult], None]:
    """Each case's line, or for the locked set only a count on stderr: its cases
    are not read while the model's prompt and policy are worked on."""
    done = 0

    def show(result: CaseResult) -> None:
        nonlocal done
        done += 1
        if name == LOCKED:
            _progress(f"{name}: {done}/{total}")
        else:
            print(case_line(result), flush=True)
    return show


async def _run(config: Config, args: argparse.Namespace) -> int:
    sets = _sets(args)
    if not sets:
        print("overt: no case matches --case", file=sys.stderr)
        return 2
    if args.local_policy is not None:
        local = {**config.providers.get("local", {}), "local_policy": args.local_policy}
        config = config.with_(providers={**config.providers, "local": local})
    model, catalog = _model(config)
    suites: list[SuiteResult] = []
    try:
        for name, cases in sets.items():
            _progress(f"evaluating {model.name} on the {name} set ({len(cases)} cases)")
            suite = await run_suite(model, cases, config, name=name,
                                    on_case=_case_printer(name, len(cases)))
            suites.append(suite)
            print()
            print("\n".join(summary_lines(suite.summary())))
            print()
    finally:
        await _close(model, catalog)
    if len(suites) > 1:
        print("\n".join(sets_lines([s.summary() for s in suites])))
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        result = {"sets": {s.name: s.to_dict() for s in suites}}
        out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n",
                       encoding="utf-8")
        _progress(f"wrote {out}")
    if not args.no_record:
        await _record(config, suites)
    return 0


def run(config: Config, args: argparse.Namespace) -> int:
    """Run ``overt eval``.

    Raises:
        UsageError: the case file is not valid, or the model spec names no model.
        ModelError, LedgerError: the model or the ledger cannot be used.
    """
    return asyncio.run(_run(config, args))
