"""Eval cases: what an operator asks, and what a right answer does.

A case file is JSON (``.json``) or TOML (``.toml``) holding::

    {
      "format": "overt-eval/1",
      "about": "...",                       # optional: free text, not read
      "seed": { ... },                      # the default seed of every case
      "cases": [
        {
          "id": "usage-today-en",           # unique, [a-z0-9_.-]
          "category": "usage",              # free text, for the per-category figures
          "lang": "en",                     # free text (en, ja, ...)
          "question": "How much have I spent today?",
          "history": [                      # optional: a prior exchange, same session
            {"role": "user", "content": "..."},
            {"role": "assistant", "content": "..."}
          ],
          "expect": {
            "tool": "get_usage",            # a name, a list of acceptable names, or null
            "args": {"period": "today"},    # optional: the arguments that matter
            "also_allowed": ["node_read"]   # optional: other tools that do no harm
          },
          "grounded_in": ["get_usage.total_cost_usd"],  # optional, see below
          "answer_includes_any": ["cannot", "できません"],  # optional
          "allowed_figures": [391],         # optional: figures the answer may compute
          "seed": { ... }                   # optional: replaces the file's seed
        }
      ]
    }

``expect.tool`` null means the right answer calls no tool. An argument matcher
is a value (equal; strings compared case-insensitively, trimmed), or an object
with one key: ``{"contains": "db-stg"}``, ``{"contains_any": [...]}``,
``{"contains_all": [...]}``, ``{"one_of": [...]}`` or ``{"absent_or": value}``
(the argument is left out, so the tool's default applies, or equals value).
The argument name ``*`` matches against all the arguments together (a fact
to remember may go in a title or a body).

``grounded_in`` names tool result fields (``TOOL.FIELD``, dotted for nested
fields) whose value the answer must state: a figure in the answer equal to it,
as written or rounded, or for text the text itself.

A seed is the data the case's fresh ledger starts with::

    {
      "usage": [{"model": "openai:gpt-4o-mini", "route": "default",
                 "input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.0123,
                 "count": 2}],
      "pending_approvals": [{"tool_name": "deploy", "source": "slack_dm"}],
      "memory": [{"ref": "stg-db", "kind": "Note", "title": "...", "body": "..."}],
      "links": [{"kind": "applies_to", "from": "decision", "to": "stg-db"}]
    }

``{{node:REF}}`` in a question, a history message or an expected argument
stands for the id the seeded node ``REF`` got in this case's ledger.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from overt import json_input
from overt.errors import UsageError

FORMAT = "overt-eval/1"
_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
MATCHERS = ("contains", "contains_any", "contains_all", "one_of", "absent_or")


@dataclass(frozen=True, slots=True)
class Expectation:
    """The tool a right answer calls (``tools`` empty: none) and the arguments that matter."""

    tools: tuple[str, ...]
    args: Mapping[str, Any] = field(default_factory=dict)
    also_allowed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One operator task."""

    id: str
    question: str
    expect: Expectation
    category: str = ""
    lang: str = ""
    history: tuple[tuple[str, str], ...] = ()
    """(role, content) pairs sent before the question, oldest first."""
    grounded_in: tuple[str, ...] = ()
    answer_includes_any: tuple[str, ...] = ()
    allowed_figures: tuple[float, ...] = ()
    seed: Mapping[str, Any] = field(default_factory=dict)


def shipped_path() -> Path:
    """The case file shipped in the package."""
    return Path(str(resources.files("overt.evals").joinpath("cases.json")))


def load_cases(path: str | Path | None = None) -> list[EvalCase]:
    """The cases of the file at ``path`` (default: the shipped suite).

    Raises:
        UsageError: the file cannot be read or is not a valid case file (the
            message names the case and the field).
    """
    target = Path(path) if path is not None else shipped_path()
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read eval cases {target}: {exc}") from exc
    try:
        data = (tomllib.loads(text) if target.suffix == ".toml"
                else json_input.loads(text, what="the cases"))
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"eval cases {target}: not valid "
                         f"{'TOML' if target.suffix == '.toml' else 'JSON'}: {exc}") from exc
    return parse_cases(data, source=str(target))


def parse_cases(data: Any, *, source: str = "cases") -> list[EvalCase]:
    """Cases from a decoded case file.

    Raises:
        UsageError: not a valid case file.
    """
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a case file is an object with a cases list")
    _only(data, ("format", "about", "seed", "cases"), source)
    if data.get("format", FORMAT) != FORMAT:
        raise UsageError(f"{source}: format {data.get('format')!r} is not {FORMAT!r}")
    raw = data.get("cases")
    if not isinstance(raw, list) or not raw:
        raise UsageError(f"{source}: cases must be a non-empty list")
    default_seed = _seed(data.get("seed", {}), f"{source}: seed")
    cases = [_case(item, i, default_seed, source) for i, item in enumerate(raw)]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise UsageError(f"{source}: case id {case.id!r} is used twice")
        seen.add(case.id)
    return cases


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be an object")
    return value


_CASE_KEYS = ("id", "category", "lang", "question", "history", "expect", "grounded_in",
              "answer_includes_any", "allowed_figures", "seed")


_SEED_ROWS = {"usage": ("model", "route", "session", "input_tokens", "output_tokens",
                        "cost_usd", "count"),
              "pending_approvals": ("tool_name", "arguments", "actor", "source"),
              "memory": ("ref", "kind", "title", "body"),
              "links": ("kind", "from", "to")}


def _seed(value: Any, where: str) -> dict[str, Any]:
    """A seed whose tables and row fields are all known (a misspelt one seeded nothing,
    or a zero, unsaid)."""
    seed = _mapping(value, where)
    _only(seed, tuple(_SEED_ROWS), where)
    for table, fields in _SEED_ROWS.items():
        rows = seed.get(table, [])
        if not isinstance(rows, list):
            raise UsageError(f"{where}.{table} must be a list")
        for n, row in enumerate(rows):
            _only(_mapping(row, f"{where}.{table}[{n}]"), fields, f"{where}.{table}[{n}]")
    return seed


def _only(value: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    """Refuse keys not in ``known``: a misspelt check ("answer_include_any") was left
    out unsaid, and the case graded without it."""
    unknown = [key for key in value if key not in known]
    if unknown:
        raise UsageError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))} (known: {', '.join(known)})")


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a string or a list of strings")
    return tuple(value)


def _case(item: Any, index: int, default_seed: Mapping[str, Any], source: str) -> EvalCase:
    where = f"{source}: case {index + 1}"
    item = _mapping(item, where)
    case_id = item.get("id")
    if not isinstance(case_id, str) or not _ID.match(case_id):
        raise UsageError(f"{where}: id must be a string of letters, digits, _ . -")
    where = f"{source}: case {case_id}"
    _only(item, _CASE_KEYS, where)
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        raise UsageError(f"{where}: question must be a non-empty string")
    if "expect" not in item:
        raise UsageError(f"{where}: expect is required (use {{\"tool\": null}} for no tool)")
    expect = _mapping(item["expect"], f"{where}: expect")
    _only(expect, ("tool", "args", "also_allowed"), f"{where}: expect")
    if "tool" not in expect:
        raise UsageError(f"{where}: expect.tool is required (null: no tool)")
    args = _mapping(expect.get("args", {}), f"{where}: expect.args")
    for name, matcher in args.items():
        _check_matcher(matcher, f"{where}: expect.args.{name}")
    tools = _strings(expect["tool"], f"{where}: expect.tool")
    if args and not tools:
        raise UsageError(f"{where}: expect.args given but expect.tool is null")
    history = []
    for n, message in enumerate(item.get("history", [])):
        message = _mapping(message, f"{where}: history[{n}]")
        _only(message, ("role", "content"), f"{where}: history[{n}]")
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant") or not isinstance(content, str):
            raise UsageError(f"{where}: history[{n}] needs role user|assistant and content")
        history.append((role, content))
    figures = item.get("allowed_figures", [])
    if not isinstance(figures, list) or not all(
            isinstance(f, int | float) and not isinstance(f, bool) for f in figures):
        raise UsageError(f"{where}: allowed_figures must be a list of numbers")
    seed = _seed(item.get("seed", default_seed), f"{where}: seed")
    return EvalCase(
        id=case_id, question=question, category=str(item.get("category", "")),
        lang=str(item.get("lang", "")), history=tuple(history),
        expect=Expectation(tools=tools, args=args,
                           also_allowed=_strings(expect.get("also_allowed"),
                                                 f"{where}: expect.also_allowed")),
        grounded_in=_strings(item.get("grounded_in"), f"{where}: grounded_in"),
        answer_includes_any=_strings(item.get("answer_includes_any"),
                                     f"{where}: answer_includes_any"),
        allowed_figures=tuple(float(f) for f in figures), seed=seed)


def _check_matcher(matcher: Any, where: str) -> None:
    if not isinstance(matcher, dict):
        return
    if len(matcher) != 1 or next(iter(matcher)) not in MATCHERS:
        raise UsageError(f"{where}: a matcher object has one key of {', '.join(MATCHERS)}")
    key, value = next(iter(matcher.items()))
    if key in ("contains_any", "contains_all", "one_of") and not isinstance(value, list):
        raise UsageError(f"{where}: {key} takes a list")


def node_refs(text: str) -> Sequence[str]:
    """The ``{{node:REF}}`` references in ``text``."""
    return re.findall(r"\{\{node:([A-Za-z0-9_.-]+)\}\}", text)
