"""``overt replay``: recorded turns run again through today's engine, gate, hooks and
history window, answered from the record; every divergence is a line.

Exit 0: nothing diverges; 1: something does; 3: the ledger does not verify (nothing
is replayed). ``--policy FILE``: the same replay under another policy (a TOML file
with ``[[policy.rules]]`` as in overt.toml), with a summary of the decisions it
changes, per rule. ``--model SPEC``: each recorded request is also put to that model,
and each answer that differs from the recorded one is a divergence. ``--record``:
append the run as one ``replay.completed`` entry.
"""

from __future__ import annotations

import argparse
import json
import time
import tomllib
from pathlib import Path
from typing import Any

from overt.cli import flags
from overt.clock import period_start
from overt.config import Config
from overt.errors import ConfigError, UsageError
from overt.events import ReplayCompleted
from overt.ledger.canonical import canonical_json, digest_text
from overt.policy.engine import Policy
from overt.policy.gate import PolicySettings
from overt.policy.rules import rule_from_mapping
from overt.replay import ReplayRefused, ReplaySummary, TurnReplay

EXIT_OK, EXIT_DIVERGED, EXIT_VERIFY = 0, 1, 3


def add_parser(sub: Any) -> None:
    replay = sub.add_parser(
        "replay", help="re-run recorded turns against today's engine, policy and plugins")
    replay.add_argument("turn_id", nargs="?", type=flags.turn_id, help="the turn to replay")
    replay.add_argument("--session", type=flags.session_id,
                        help="replay every turn of this session")
    replay.add_argument("--since", help="replay the turns started since (7d, 24h, ISO time)")
    replay.add_argument("--policy", type=Path, help="what-if: replay under this policy "
                        "(a TOML file with [[policy.rules]])")
    replay.add_argument("--model", metavar="SPEC",
                        help="also ask this model each recorded request and compare its "
                        "answers with the recorded ones, byte for byte (local: greedy)")
    replay.add_argument("--record", action="store_true",
                        help="append this run to the ledger as one replay.completed entry")
    replay.add_argument("--json", action="store_true")


def load_policy(path: Path, current: PolicySettings) -> PolicySettings:
    """The policy in ``path`` (overt.toml's ``[policy]`` shape, or bare ``[[rules]]``).

    Raises:
        UsageError: the file cannot be read or holds no valid rules.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read policy file {path}: {exc}") from None
    table = data.get("policy", data)
    if not isinstance(table, dict) or not isinstance(table.get("rules", []), list):
        raise UsageError(f"{path}: expected [[policy.rules]] tables")
    try:
        rules = tuple(rule_from_mapping(r) for r in table.get("rules", []))
        defaults = table.get("defaults", current.defaults)
        Policy(rules, defaults=bool(defaults))  # unique names, valid rules
    except (ConfigError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    return PolicySettings(rules, bool(defaults), current.approval_ttl_s)


async def run(args: argparse.Namespace, config: Config) -> int:
    from overt.runtime import Runtime

    if sum(x is not None for x in (args.turn_id, args.session, args.since)) != 1:
        raise UsageError("replay needs one of TURN_ID, --session ID or --since PERIOD")
    since = period_start(args.since) if args.since is not None else None
    policy_digest = None
    if args.policy is not None:
        settings = load_policy(args.policy, config.policy)
        config = config.with_(policy=settings)
        policy_digest = Policy(settings.rules, defaults=settings.defaults).digest
    if args.model is not None:
        config = config.with_(model=args.model)
    runtime = Runtime.from_config(config)
    summary = ReplaySummary()
    results: list[TurnReplay] = []
    started = time.perf_counter()
    try:
        try:
            async for result in runtime.replay(turn_id=args.turn_id, session_id=args.session,
                                               since=since,
                                               ask=runtime.model if args.model else None):
                summary.add(result)
                if result.divergences or result.notes:
                    results.append(result)
                if not args.json:
                    for d in result.divergences:
                        print(d.line())
                    for note in result.notes:
                        print(f"note: {note}")
        except ReplayRefused as exc:
            if args.json:
                print(json.dumps({"refused": str(exc)}))
            else:
                print(f"replay refused: {exc}")
            return EXIT_VERIFY
        if args.record:
            await runtime.ledger.record([ReplayCompleted(
                turns=summary.turns, divergent_turns=summary.divergent_turns,
                divergences=summary.divergences, policy_digest=policy_digest,
                scope_digest=digest_text(canonical_json(
                    {"turn": args.turn_id, "session": args.session, "since": since})),
                duration_ms=round((time.perf_counter() - started) * 1000, 3))])
    finally:
        await runtime.close()
    if args.json:
        print(json.dumps({"summary": summary.to_dict(),
                          "turns": [r.to_dict() for r in results]}, ensure_ascii=False,
                         indent=2))
    else:
        print(f"{summary.turns} turns replayed, {summary.divergent_turns} diverge "
              f"({summary.divergences} divergences, {summary.notes} notes)"
              + (f"; {summary.asked} recorded requests asked of {runtime.model.name}"
                 if args.model else ""))
        for rule, count in sorted(summary.decisions_changed.items()):
            print(f"  rule {rule}: {count} decisions change")
    return EXIT_DIVERGED if summary.divergences else EXIT_OK
