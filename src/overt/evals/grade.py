"""Grading one answer: the right tool, the right arguments, only grounded figures.

A case passes when every check holds:

- **tool**: with ``expect.tool`` null, no tool was called; otherwise a call
  went to one of the expected tools, and every call went to an expected tool
  or one ``also_allowed``;
- **args**: some call to an expected tool has arguments matching every
  matcher of ``expect.args``;
- **figures**: every figure in the answer comes from a tool result, the
  question, the earlier messages or ``allowed_figures`` (an invented figure
  fails the case and is counted on its own);
- **grounding**: each ``grounded_in`` field's value is stated in the answer;
- **includes**: with ``answer_includes_any``, the answer contains one of them;
- **excludes**: with ``answer_excludes``, the answer contains none of them;
- **states**: each of ``answer_figures`` is a figure of the answer, as written
  or rounded, and so is every figure of one of ``answer_figures_any``;
- **language**: with ``answer_language``, the answer is written in it
  (:mod:`~overt.evals.language`);
- **names**: with ``check_names``, every named fact of the answer comes from a
  tool result, the question, the earlier messages or what the model was shown
  (``shown``: the system prompt and tool descriptions); an invented name fails
  the case and is counted on its own (:mod:`~overt.evals.names`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from overt.evals.cases import EvalCase
from overt.evals.figures import answer_figures, grounded, invented
from overt.evals.language import language_of
from overt.evals.names import invented_names


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the model made, and what the tool returned (None: never ran)."""

    name: str
    arguments: Mapping[str, Any]
    result: str | None = None


@dataclass(frozen=True, slots=True)
class Grade:
    """The verdict on one case, with a reason per failed check."""

    passed: bool
    tool_ok: bool
    args_ok: bool
    invented: tuple[str, ...] = ()
    failures: tuple[str, ...] = field(default_factory=tuple)
    invented_names: tuple[str, ...] = ()


def substitute(value: Any, ids: Mapping[str, str]) -> Any:
    """``value`` with each ``{{node:REF}}`` replaced by the seeded node's id."""
    if isinstance(value, str):
        return re.sub(r"\{\{node:([A-Za-z0-9_.-]+)\}\}",
                      lambda m: ids.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [substitute(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, ids) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _same(given: Any, wanted: Any) -> bool:
    if isinstance(wanted, str) and isinstance(given, str):
        return given.strip().casefold() == wanted.strip().casefold()
    if isinstance(wanted, int | float) and isinstance(given, int | float):
        return float(given) == float(wanted)
    return bool(given == wanted)


def _has(given: Any, part: Any) -> bool:
    return str(part).casefold() in _text(given).casefold()


def matches(arguments: Mapping[str, Any], name: str, matcher: Any) -> bool:
    """Whether argument ``name`` of ``arguments`` satisfies ``matcher`` (``name``
    ``*``: the arguments as a whole, for a fact that may go in any of them)."""
    if name == "*":
        arguments = {"*": _text(dict(arguments))}
    present = name in arguments and arguments[name] is not None
    given = arguments.get(name)
    if isinstance(matcher, dict) and len(matcher) == 1:
        key, wanted = next(iter(matcher.items()))
        if key == "absent_or":
            return not present or _same(given, wanted)
        if not present:
            return False
        if key == "contains":
            return _has(given, wanted)
        if key == "contains_any":
            return any(_has(given, w) for w in wanted)
        if key == "contains_all":
            return all(_has(given, w) for w in wanted)
        if key == "one_of":
            return any(_same(given, w) for w in wanted)
    return present and _same(given, matcher)


def _field(result: str, path: str) -> Any:
    try:
        value: Any = json.loads(result)
    except ValueError:
        return None
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _stated(answer: str, value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        pool = {Decimal(str(value))}
        return any(grounded(f, pool) for f in answer_figures(answer))
    return _has(answer, value)


def grade(case: EvalCase, calls: Sequence[Call], answer: str, *,
          ids: Mapping[str, str] | None = None, shown: str = "") -> Grade:
    """Grade ``answer`` to ``case`` given the tool ``calls`` the turn made (``shown``:
    what the model was shown besides the conversation, a source of names)."""
    ids = ids or {}
    expect = case.expect
    failures: list[str] = []
    names = [c.name for c in calls]
    if not expect.tools:
        tool_ok = not calls
        if not tool_ok:
            failures.append(f"called {', '.join(names)}; no tool was needed")
    else:
        allowed = set(expect.tools) | set(expect.also_allowed)
        stray = [n for n in names if n not in allowed]
        hit = [c for c in calls if c.name in expect.tools]
        tool_ok = bool(hit) and not stray
        if not hit:
            failures.append(f"called {', '.join(names) or 'no tool'}; "
                            f"expected {' or '.join(expect.tools)}")
        elif stray:
            failures.append(f"also called {', '.join(stray)}")
    wanted = substitute(dict(expect.args), ids)
    args_ok = True
    if expect.tools and wanted:
        args_ok = any(all(matches(c.arguments, k, m) for k, m in wanted.items())
                      for c in calls if c.name in expect.tools)
        if not args_ok:
            given = [dict(c.arguments) for c in calls if c.name in expect.tools]
            failures.append(f"arguments {_text(given)} do not match {_text(wanted)}")
    sources = [case.question, *(content for _, content in case.history),
               *(substitute(content, ids) for _, content in case.history),
               *(c.result for c in calls if c.result is not None),
               *(_text(dict(c.arguments)) for c in calls)]
    made_up = invented(answer, sources, (*case.allowed_figures, *case.answer_figures,
                                         *(f for one in case.answer_figures_any for f in one)))
    if made_up:
        failures.append(f"invented figures: {', '.join(made_up)}")
    for path in case.grounded_in:
        tool, _, rest = path.partition(".")
        values = [_field(c.result, rest) for c in calls if c.name == tool and c.result]
        if not any(_stated(answer, v) for v in values):
            failures.append(f"answer does not state {path}")
    if case.answer_includes_any and not any(
            w.found_in(answer) for w in case.answer_includes_any):
        failures.append(f"answer says none of {_text(list(map(str, case.answer_includes_any)))}")
    said = [str(w) for w in case.answer_excludes if w.found_in(answer)]
    if said:
        failures.append(f"answer says {_text(said)}")
    figures = answer_figures(answer)

    def states(wanted_figure: float) -> bool:
        pool = {Decimal(str(wanted_figure))}
        return any(grounded(f, pool) for f in figures)

    for wanted_figure in case.answer_figures:
        if not states(wanted_figure):
            failures.append(f"answer does not state {_show(wanted_figure)}")
    if case.answer_figures_any and not any(all(map(states, one))
                                           for one in case.answer_figures_any):
        failures.append("answer states none of " + " or ".join(
            "+".join(map(_show, one)) for one in case.answer_figures_any))
    if case.answer_language:
        written = language_of(answer)
        if written != case.answer_language:
            failures.append(f"answer is in {written or 'no language'}, "
                            f"not {case.answer_language}")
    made_up_names: list[str] = []
    if case.check_names:
        made_up_names = invented_names(answer, [*sources, shown])
        if made_up_names:
            failures.append(f"invented names: {', '.join(made_up_names)}")
    return Grade(passed=not failures, tool_ok=tool_ok, args_ok=args_ok,
                 invented=tuple(made_up), failures=tuple(failures),
                 invented_names=tuple(made_up_names))


def _show(value: float) -> str:
    return format(Decimal(str(value)).normalize(), "f")
