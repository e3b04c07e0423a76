"""``overt eval --model SPEC [--cases FILE] [--json OUT]``: run the eval suite.

Each case runs on a fresh, seeded ledger (see :mod:`overt.evals`); the
per-case lines, then accuracy, invented figures and p50/p95 latency are
printed, the whole result is written as JSON with ``--json``, and an
``eval.completed`` entry (model, model digest, prompt digest, cases digest,
figures) goes to the configured ledger unless ``--no-record``.

Attached by :mod:`overt.cli.main`: :func:`add_parser` adds the command,
:func:`run` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from overt.cli import flags
from overt.config import Config, routing
from overt.evals.cases import load_cases
from overt.evals.runner import SuiteResult, case_line, run_suite, summary_lines
from overt.hooks.manager import PluginHost
from overt.ledger import open_ledger
from overt.models.base import Model
from overt.models.options import ModelOptions
from overt.models.resolve import ModelCatalog

COMMANDS = ("eval",)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``eval`` to ``sub`` (the top-level commands)."""
    p = sub.add_parser("eval", help="run the eval suite of operator questions against a model")
    p.add_argument("--model", metavar="SPEC",
                   help="the model to evaluate (local, local:small, openai:NAME, ...; "
                        "default: the configured model)")
    p.add_argument("--cases", metavar="FILE",
                   help="a case file, JSON or TOML (default: the suite shipped with overt)")
    p.add_argument("--json", metavar="OUT", help="write the full result as JSON to OUT")
    p.add_argument("--case", action="append", default=[], metavar="ID", type=flags.case_id,
                   help="run only this case (repeatable; a prefix selects several)")
    p.add_argument("--no-record", action="store_true",
                   help="do not write the eval.completed entry to the ledger")


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


async def _record(config: Config, suite: SuiteResult) -> None:
    ledger = open_ledger(config.db, read_only=config.read_only,
                         create=config.create_ledger)
    try:
        await ledger.record([suite.event()])
    finally:
        await ledger.close()


async def _run(config: Config, args: argparse.Namespace) -> int:
    cases = load_cases(args.cases)
    if args.case:
        cases = [c for c in cases if any(c.id.startswith(p) for p in args.case)]
    if not cases:
        print("overt: no case matches --case", file=sys.stderr)
        return 2
    model, catalog = _model(config)
    try:
        _progress(f"evaluating {model.name} on {len(cases)} cases")
        suite = await run_suite(model, cases, config,
                                on_case=lambda r: print(case_line(r), flush=True))
    finally:
        await _close(model, catalog)
    summary = suite.summary()
    print()
    print("\n".join(summary_lines(summary)))
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(suite.to_dict(), ensure_ascii=False, indent=2) + "\n",
                       encoding="utf-8")
        _progress(f"wrote {out}")
    if not args.no_record:
        await _record(config, suite)
    return 0


def run(config: Config, args: argparse.Namespace) -> int:
    """Run ``overt eval``.

    Raises:
        UsageError: the case file is not valid, or the model spec names no model.
        ModelError, LedgerError: the model or the ledger cannot be used.
    """
    return asyncio.run(_run(config, args))
