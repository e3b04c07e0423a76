"""Policy rules that can never apply to the tools the agent has.

A rule is matched by tool name globs and, optionally, conditions on the call's
arguments. A typo in either (``tools = ["get_usag"]``, ``arg = "targt.env"``) leaves
the rule matching nothing, and the calls it was written for are decided by the
rules below it, without a word; so does a misspelt actor kind or route name.
:func:`dead_rules` names such rules, so that ``overt config check`` and a starting
runtime can say so.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable

from overt.policy.actors import ACTOR_KINDS
from overt.policy.rules import DEFAULT_RULES, Rule
from overt.types import ToolSpec


def dead_rules(rules: Iterable[Rule], tools: Iterable[ToolSpec], *,
               routes: Collection[str] = ()) -> list[str]:
    """One line for each of ``rules`` (the built-in defaults left out) that no call
    to ``tools`` can match: its ``tools`` globs match none of them, its ``actors``
    name no actor kind (``agnet:*``), its ``routes`` match none of ``routes`` (the
    routes the config defines; none given: not checked), or a condition (other than
    ``absent``) is on an argument that none of the tools it matches takes."""
    specs = list(tools)
    names = ", ".join(sorted(s.name for s in specs)) or "none"
    lines = []
    for rule in rules:
        if rule in DEFAULT_RULES:
            continue
        if rule.actors is not None and not any(
                fnmatch.fnmatchcase(kind, pattern.partition(":")[0])
                for pattern in rule.actors for kind in ACTOR_KINDS):
            lines.append(f"policy rule {rule.name!r}: actors {list(rule.actors)} name no "
                         f"actor kind ({', '.join(ACTOR_KINDS)}), so it never applies")
            continue
        if routes and rule.routes is not None and not any(
                fnmatch.fnmatchcase(route, pattern)
                for pattern in rule.routes for route in routes):
            lines.append(f"policy rule {rule.name!r}: routes {list(rule.routes)} match no "
                         f"route the config defines ({', '.join(routes)}), so it never "
                         "applies")
            continue
        matched = [s for s in specs
                   if any(fnmatch.fnmatchcase(s.name, glob) for glob in rule.tools)]
        if not matched:
            lines.append(f"policy rule {rule.name!r}: tools {list(rule.tools)} match no "
                         f"tool the agent has, so it never applies (tools: {names})")
            continue
        for condition in rule.when:
            argument = condition.arg.split(".")[0]
            if condition.op != "absent" and not any(_takes(s, argument) for s in matched):
                lines.append(f"policy rule {rule.name!r}: no tool it matches takes an "
                             f"argument {argument!r} (its condition on {condition.arg!r}), "
                             "so it never applies")
    return lines


def _takes(spec: ToolSpec, argument: str) -> bool:
    """Whether ``spec``'s input schema has ``argument``, or may have any argument."""
    schema = spec.input_schema
    properties = schema.get("properties")
    if not isinstance(properties, dict) or schema.get("additionalProperties", False) \
            not in (False, None):
        return True  # a schema that does not list its arguments: it may take this one
    return argument in properties
