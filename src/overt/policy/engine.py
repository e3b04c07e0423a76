"""Evaluating rules: the first matching rule in priority order decides.

Rules are sorted by priority (higher first; ties keep config order) and end
with :data:`~overt.policy.rules.DEFAULT_RULES`, so every call gets a decision.
What a rule matches besides arguments (tool, source, route, actor, mutating)
is the same for every call of one tool in one place, so the candidates for
that key are computed once and cached: a call then only tests argument
conditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from overt.errors import ConfigError
from overt.ledger.canonical import canonical_json, digest_text
from overt.policy.rules import DEFAULT_RULES, Effect, Rule


@dataclass(frozen=True, slots=True)
class Decision:
    """A policy's answer for one call, with why."""

    effect: Effect
    reason_code: str
    message: str
    rule: str
    rules_evaluated: tuple[str, ...]
    """The rules that applied to this call's tool, source, route and actor, in the
    order checked, up to and including the one that fired."""


_CacheKey = tuple[str, str, str, str, bool]


class Policy:
    """An ordered rule table. Immutable once built; safe to share between turns."""

    def __init__(self, rules: Iterable[Rule] = (), *, defaults: bool = True) -> None:
        given = list(rules)
        names = [r.name for r in given]
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise ConfigError(f"policy rule names must be unique: {', '.join(dupes)}")
        ordered = sorted(enumerate(given), key=lambda pair: (-pair[1].priority, pair[0]))
        self.rules: tuple[Rule, ...] = tuple(r for _, r in ordered) + (
            DEFAULT_RULES if defaults else ())
        self._candidates: dict[_CacheKey, tuple[Rule, ...]] = {}
        self.text = canonical_json([rule_form(r) for r in self.rules])
        """The rules in force, in the order checked, as canonical JSON (what a decision's
        ``policy_digest`` names in the content tier)."""
        self.digest = digest_text(self.text)

    def decide(self, tool: str, arguments: Mapping[str, Any], *, source: str, route: str,
               actor: str, mutating: bool) -> Decision:
        """The decision for one call. Never raises on any arguments."""
        key = (tool, source, route, actor, mutating)
        candidates = self._candidates.get(key)
        if candidates is None:
            candidates = tuple(r for r in self.rules
                               if r.matches_call(tool, source, route, actor, mutating))
            if len(self._candidates) < 10_000:
                self._candidates[key] = candidates
        for index, rule in enumerate(candidates):
            if not rule.when or rule.matches_arguments(arguments):
                return Decision(rule.effect, rule.reason_code, rule.message, rule.name,
                                tuple(r.name for r in candidates[:index + 1]))
        # Only a policy built without defaults gets here: nothing matched, so deny.
        return Decision("deny", "no_rule_matched", "no policy rule matches this call",
                        "(none)", tuple(r.name for r in candidates))


def rule_form(rule: Rule) -> dict[str, Any]:
    """A rule as the policy's canonical text holds it (config's shape)."""
    return {"name": rule.name, "effect": rule.effect, "reason_code": rule.reason_code,
            "message": rule.message, "priority": rule.priority, "tools": list(rule.tools),
            "sources": _listed(rule.sources), "routes": _listed(rule.routes),
            "actors": _listed(rule.actors), "mutating": rule.mutating,
            "when": [{"arg": c.arg, "op": c.op, "value": _jsonable(c.value)}
                     for c in rule.when]}


def _listed(value: tuple[str, ...] | None) -> list[str] | None:
    return list(value) if value is not None else None


def _jsonable(value: Any) -> Any:
    value = list(value) if isinstance(value, tuple) else value
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
