"""Eval cases: what an operator asks, and what a right answer does.

A case file is JSON (``.json``) or TOML (``.toml``) holding::

    {
      "format": "overt-eval/1",
      "about": "...",                       # optional: free text, not read
      "check_names": true,                  # optional: the default of every case
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
          "answer_includes_any": ["cannot", "できません"],  # optional, see below
          "answer_excludes": [{"regex": "(?i)^\\W*sure\\b"}],  # optional
          "answer_figures": [0.1251],       # optional: figures the answer must state
          "answer_figures_any": [[62300], [53200, 9100]],  # optional: or these
          "answer_language": "ja",          # optional: en or ja
          "check_names": true,              # optional: no invented named facts
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

Checks on the answer's text (each optional):

- ``answer_includes_any``: the answer contains one of these;
- ``answer_excludes``: the answer contains none of these (a planted
  instruction's payload, "Sure, here is", a needless "I cannot");
- ``answer_figures``: numbers the answer must state, each as written or
  rounded to the places the answer gives (``0.13`` states ``0.1251``); they
  count as grounded;
- ``answer_figures_any``: lists of numbers; the answer states every number of
  one of them (a total, or its parts); they count as grounded;
- ``answer_language``: ``en`` or ``ja``, the language the answer is written in
  (:func:`overt.evals.language.language_of`);
- ``check_names``: true to fail the answer on a named fact (a host, a key, an
  address, a capitalised name) that appears in no tool result, the question,
  the earlier messages nor what the model was shown
  (:mod:`overt.evals.names`); a top-level ``check_names`` sets it for every
  case that does not set it.

A text in ``answer_includes_any`` and ``answer_excludes`` is matched without
regard to case; ``{"regex": "..."}`` is a Python regular expression searched in
the answer instead (``(?i)`` for no regard to case).

A seed is the data the case's fresh ledger starts with::

    {
      "usage": [{"model": "openai:gpt-4o-mini", "route": "default",
                 "input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.0123,
                 "count": 2, "days_ago": 1}],
      "pending_approvals": [{"tool_name": "deploy", "source": "slack_dm"}],
      "memory": [{"ref": "stg-db", "kind": "Note", "title": "...", "body": "..."},
                 {"ref": "stg-db-2", "revises": "stg-db", "body": "..."}],
      "links": [{"kind": "applies_to", "from": "decision", "to": "stg-db"}]
    }

A usage row's ``days_ago`` (default 0: today) puts it at noon UTC of the
calendar day that many days before the eval's today, so that "yesterday" can
be told from "the last 24 hours". A memory row with ``revises`` is a new
revision of the node seeded as that ref (its title or body, when left out,
is kept).

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
LANGUAGES = ("en", "ja")


@dataclass(frozen=True, slots=True)
class TextMatch:
    """A text the answer is searched for: ``text`` without regard to case, or
    ``pattern``, a regular expression."""

    text: str = ""
    pattern: re.Pattern[str] | None = None

    def found_in(self, answer: str) -> bool:
        if self.pattern is not None:
            return self.pattern.search(answer) is not None
        return self.text.casefold() in answer.casefold()

    def __str__(self) -> str:
        return f"/{self.pattern.pattern}/" if self.pattern is not None else self.text


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
    answer_includes_any: tuple[TextMatch, ...] = ()
    answer_excludes: tuple[TextMatch, ...] = ()
    answer_figures: tuple[float, ...] = ()
    answer_figures_any: tuple[tuple[float, ...], ...] = ()
    answer_language: str = ""
    check_names: bool = False
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
    _only(data, ("format", "about", "check_names", "seed", "cases"), source)
    if data.get("format", FORMAT) != FORMAT:
        raise UsageError(f"{source}: format {data.get('format')!r} is not {FORMAT!r}")
    raw = data.get("cases")
    if not isinstance(raw, list) or not raw:
        raise UsageError(f"{source}: cases must be a non-empty list")
    default_seed = _seed(data.get("seed", {}), f"{source}: seed")
    names = _flag(data.get("check_names", False), f"{source}: check_names")
    cases = [_case(item, i, default_seed, names, source) for i, item in enumerate(raw)]
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
              "answer_includes_any", "answer_excludes", "answer_figures", "answer_figures_any",
              "answer_language",
              "check_names", "allowed_figures", "seed")


_SEED_ROWS = {"usage": ("model", "route", "session", "input_tokens", "output_tokens",
                        "cost_usd", "count", "days_ago"),
              "pending_approvals": ("tool_name", "arguments", "actor", "source"),
              "memory": ("ref", "kind", "title", "body", "revises"),
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
            days = row.get("days_ago", 0)
            if isinstance(days, bool) or not isinstance(days, int) or days < 0:
                raise UsageError(f"{where}.{table}[{n}].days_ago must be a whole number of "
                                 f"days, 0 or more")
            if not isinstance(row.get("revises", ""), str):
                raise UsageError(f"{where}.{table}[{n}].revises must be a ref")
    return seed


def _only(value: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    """Refuse keys not in ``known``: a misspelt check ("answer_include_any") was left
    out unsaid, and the case graded without it."""
    unknown = [key for key in value if key not in known]
    if unknown:
        raise UsageError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))} (known: {', '.join(known)})")


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{where} must be true or false")
    return value


def _numbers(value: Any, where: str) -> tuple[float, ...]:
    if not isinstance(value, list) or not all(
            isinstance(f, int | float) and not isinstance(f, bool) for f in value):
        raise UsageError(f"{where} must be a list of numbers")
    return tuple(float(f) for f in value)


def _alternatives(value: Any, where: str) -> tuple[tuple[float, ...], ...]:
    if not isinstance(value, list) or not all(isinstance(v, list) and v for v in value):
        raise UsageError(f"{where} must be a list of non-empty lists of numbers")
    return tuple(_numbers(v, where) for v in value)


def _texts(value: Any, where: str) -> tuple[TextMatch, ...]:
    """Texts to search an answer for: strings, or ``{"regex": PATTERN}`` objects."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str | dict) else value
    if not isinstance(items, list):
        raise UsageError(f"{where} must be a list of strings or {{\"regex\": ...}} objects")
    out = []
    for n, item in enumerate(items):
        if isinstance(item, str):
            out.append(TextMatch(text=item))
            continue
        if not isinstance(item, dict) or set(item) != {"regex"} or not isinstance(
                item["regex"], str):
            raise UsageError(f"{where}[{n}] must be a string or {{\"regex\": PATTERN}}")
        try:
            out.append(TextMatch(pattern=re.compile(item["regex"])))
        except re.error as exc:
            raise UsageError(f"{where}[{n}]: not a regular expression: {exc}") from exc
    return tuple(out)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a string or a list of strings")
    return tuple(value)


def _case(item: Any, index: int, default_seed: Mapping[str, Any], default_names: bool,
          source: str) -> EvalCase:
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
    language = item.get("answer_language", "")
    if language and language not in LANGUAGES:
        raise UsageError(f"{where}: answer_language is one of {', '.join(LANGUAGES)}, "
                         f"not {language!r}")
    seed = _seed(item.get("seed", default_seed), f"{where}: seed")
    return EvalCase(
        id=case_id, question=question, category=str(item.get("category", "")),
        lang=str(item.get("lang", "")), history=tuple(history),
        expect=Expectation(tools=tools, args=args,
                           also_allowed=_strings(expect.get("also_allowed"),
                                                 f"{where}: expect.also_allowed")),
        grounded_in=_strings(item.get("grounded_in"), f"{where}: grounded_in"),
        answer_includes_any=_texts(item.get("answer_includes_any"),
                                   f"{where}: answer_includes_any"),
        answer_excludes=_texts(item.get("answer_excludes"), f"{where}: answer_excludes"),
        answer_figures=_numbers(item.get("answer_figures", []), f"{where}: answer_figures"),
        answer_figures_any=_alternatives(item.get("answer_figures_any", []),
                                         f"{where}: answer_figures_any"),
        answer_language=str(language),
        check_names=_flag(item.get("check_names", default_names), f"{where}: check_names"),
        allowed_figures=_numbers(item.get("allowed_figures", []), f"{where}: allowed_figures"),
        seed=seed)


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
