"""Policy rules: what a rule matches, and the defaults every policy ends with.

A rule matches a tool call on the tool's name (globs), the message's source,
the route, the actor (globs), whether the tool is read-only or mutating, and
conditions on the call's arguments. Its effect is ``allow``, ``deny``, ``ask``
(hold for human approval) or ``quarantine`` (hold for review; the turn goes on
without it), with a ``reason_code`` and a message a human reads.

Argument conditions read a dotted path into the arguments (``target.env``)
and compare with one operator: ``eq ne in not_in glob regex gt ge lt le
exists absent contains``. A condition on a path the call does not have is
false (except ``absent``), so a rule never fires on a value it did not see.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from overt.errors import ConfigError

Effect = Literal["allow", "deny", "ask", "quarantine"]
EFFECTS: tuple[str, ...] = ("allow", "deny", "ask", "quarantine")
OPS: tuple[str, ...] = ("eq", "ne", "in", "not_in", "glob", "regex", "gt", "ge", "lt", "le",
                        "exists", "absent", "contains")
SOURCES: tuple[str, ...] = ("cli", "http", "slack_dm", "email", "mcp")
DM_SOURCES: tuple[str, ...] = ("slack_dm", "email")
_MISSING = object()
_REASON = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")


def _lookup(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = arguments
    for part in path:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _ordered(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(actual: Any, expected: Any) -> bool:
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            return False
        return test(actual, expected)
    return compare


_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, e: bool(a == e),
    "ne": lambda a, e: bool(a != e),
    "in": lambda a, e: a in e,
    "not_in": lambda a, e: a not in e,
    "gt": _ordered(lambda a, e: bool(a > e)),
    "ge": _ordered(lambda a, e: bool(a >= e)),
    "lt": _ordered(lambda a, e: bool(a < e)),
    "le": _ordered(lambda a, e: bool(a <= e)),
    "exists": lambda a, e: True,
    "contains": lambda a, e: (isinstance(a, str) and isinstance(e, str) and e in a)
    or (isinstance(a, list) and e in a),
}


@dataclass(frozen=True, slots=True)
class Condition:
    """One test on one argument: ``arg`` (a dotted path), ``op``, ``value``.

    Raises:
        ConfigError: an unknown operator, or a value the operator cannot use.
    """

    arg: str
    op: str
    value: Any = None
    _path: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _test: Callable[[Any, Any], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.arg or not isinstance(self.arg, str):
            raise ConfigError("a condition needs arg, a dotted path into the arguments")
        if self.op not in OPS:
            raise ConfigError(f"condition on {self.arg!r}: unknown op {self.op!r} "
                              f"(one of {', '.join(OPS)})")
        if self.op in ("in", "not_in") and not isinstance(self.value, list | tuple):
            raise ConfigError(f"condition on {self.arg!r}: {self.op} needs a list value")
        if self.op in ("gt", "ge", "lt", "le") and (
                isinstance(self.value, bool) or not isinstance(self.value, int | float)):
            raise ConfigError(f"condition on {self.arg!r}: {self.op} needs a number")
        if self.op in ("glob", "regex") and not isinstance(self.value, str):
            raise ConfigError(f"condition on {self.arg!r}: {self.op} needs a string")
        test = _TESTS.get(self.op)
        if self.op in ("regex", "glob"):  # compiled once: a call only runs the match
            try:
                source = self.value if self.op == "regex" else fnmatch.translate(self.value)
                search = re.compile(source).search
            except re.error as exc:
                raise ConfigError(f"condition on {self.arg!r}: bad regex: {exc}") from None
            test = lambda a, e: isinstance(a, str) and search(a) is not None  # noqa: E731
        object.__setattr__(self, "_path", tuple(self.arg.split(".")))
        object.__setattr__(self, "_test", test)

    def holds(self, arguments: Mapping[str, Any]) -> bool:
        path = self._path
        if len(path) == 1:  # the usual case: a top-level argument
            actual = arguments.get(path[0], _MISSING) if isinstance(arguments, Mapping) \
                else _MISSING
        else:
            actual = _lookup(arguments, path)
        if actual is _MISSING:
            return self.op == "absent"
        if self.op == "absent":
            return False
        try:
            return self._test(actual, self.value)
        except TypeError:  # an argument of another type than the rule expects: no match
            return False


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule. ``None`` for a matcher means "any"; ``priority``: higher first.

    Raises:
        ConfigError: an unknown effect, source or malformed reason code.
    """

    name: str
    effect: Effect
    reason_code: str
    message: str = ""
    priority: int = 0
    tools: tuple[str, ...] = ("*",)
    sources: tuple[str, ...] | None = None
    routes: tuple[str, ...] | None = None
    actors: tuple[str, ...] | None = None
    mutating: bool | None = None
    when: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("a policy rule needs a name")
        if self.effect not in EFFECTS:
            raise ConfigError(f"rule {self.name!r}: effect must be one of {', '.join(EFFECTS)}, "
                              f"got {self.effect!r}")
        if not _REASON.match(self.reason_code):
            raise ConfigError(f"rule {self.name!r}: reason_code {self.reason_code!r} must be "
                              "lower-case letters, digits, _ . - (max 64)")
        for source in self.sources or ():
            if source not in SOURCES:
                raise ConfigError(f"rule {self.name!r}: unknown source {source!r} "
                                  f"(one of {', '.join(SOURCES)})")
        for name in ("tools", "sources", "routes", "actors", "when"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    def matches_call(self, tool: str, source: str, route: str, actor: str,
                     mutating: bool) -> bool:
        """Whether everything but the argument conditions matches."""
        return ((self.mutating is None or self.mutating == mutating)
                and (self.sources is None or source in self.sources)
                and (self.routes is None or any(fnmatch.fnmatchcase(route, r)
                                                for r in self.routes))
                and (self.actors is None or any(fnmatch.fnmatchcase(actor, a)
                                                for a in self.actors))
                and any(fnmatch.fnmatchcase(tool, t) for t in self.tools))

    def matches_arguments(self, arguments: Mapping[str, Any]) -> bool:
        for condition in self.when:  # noqa: SIM110  a loop: no generator per call (hot path)
            if not condition.holds(arguments):
                return False
        return True


MEMORY_WRITE_TOOLS: tuple[str, ...] = ("node_create", "node_supersede", "link_create",
                                        "link_retract")

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("default.read_only", "allow", "read_only", "read-only tools are allowed",
         priority=-1_000_000, mutating=False),
    Rule("default.memory_append", "allow", "memory_append_only",
         "the agent's memory is append-only: a write adds a revision and never "
         "overwrites, so it needs no approval (it still needs memory.write)",
         priority=-1_000_000, mutating=True, tools=MEMORY_WRITE_TOOLS),
    Rule("default.mutating_on_dm", "deny", "mutating_on_dm",
         "tools that change things are not run from a direct message; the operator "
         "makes changes through an operator-driven path (the CLI, approvals)",
         priority=-1_000_001, mutating=True, sources=DM_SOURCES),
    Rule("default.mutating_needs_approval", "ask", "mutating_needs_approval",
         "tools that change things wait for an operator's approval",
         priority=-1_000_002, mutating=True),
)
"""What every policy ends with: read-only allowed; writes to the agent's own
append-only memory allowed; other mutating tools denied on DM sources
(``slack_dm``, ``email``) and held for approval elsewhere."""


def rule_from_mapping(data: Mapping[str, Any]) -> Rule:
    """A rule from config's shape (lists for matchers, ``when`` a list of tables).

    Raises:
        ConfigError: a field is missing or malformed.
    """
    try:
        when = tuple(Condition(str(c["arg"]), str(c["op"]), c.get("value"))
                     for c in data.get("when", ()))
        return Rule(
            name=str(data["name"]), effect=data["effect"], reason_code=str(data["reason_code"]),
            message=str(data.get("message", "")), priority=int(data.get("priority", 0)),
            tools=tuple(data.get("tools") or ("*",)),
            sources=_maybe(data.get("sources")), routes=_maybe(data.get("routes")),
            actors=_maybe(data.get("actors")), mutating=data.get("mutating"), when=when)
    except KeyError as exc:
        raise ConfigError(f"policy rule {data.get('name', '?')!r}: {exc.args[0]} is required") \
            from None


def _maybe(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return tuple(value) if value is not None else None
