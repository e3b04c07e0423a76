"""A tool result as the small local model reads it when it answers: short lines, not JSON.

A tool's result is JSON (:func:`overt.engine.dispatch.render_result`); the ledger
records it, the eval grades against its fields, and larger models read it well. The
0.5B model does not: handed ``{"period": "today", "since":
"2026-11-25T00:00:00.000000Z", ..., "total_cost_usd": 0.0335, ...}`` it echoed
the JSON as its answer, or gave the token count when asked what was spent. So only
the answer turn of :mod:`overt.models.local` sees :func:`brief` of each result:

- one ``label: value`` line per field, the label the key with spaces
  (``total input tokens: 21849``);
- money labelled as money: a ``*_usd`` field reads ``total cost: $0.0335``;
- timestamps to the minute, in UTC (``2026-11-25 00:00 UTC``): the seconds,
  cut from their fraction, would read as a figure the result does not hold;
- ``null`` and an empty list read ``none``, booleans ``yes``/``no``;
- a list of objects one row a line (``- route default, model m, inferences 3, …``),
  without the row's empty fields (``supersedes: null``) and without a field that
  repeats an earlier one of the same row (a first revision's ``root_id``, its
  ``id``): a memory search's rows were read as one run-on line, and the 0.5B
  model answered from the wrong one;
- a breakdown of one row whose figures are the totals above it keeps only its
  names (``by route and model: route default, model m (all of it)``);
- with the operator's question given (``focus``), when it names some rows of a
  breakdown (``claude`` names ``anthropic:claude-sonnet-4``, ``support`` the route
  ``support``) but not all, only those rows are given (``asked about: ...``), without
  the totals and the other rows: asked what Claude cost, the 1.5B model answered with
  the period's total, or with the first row.

Values are never recomputed or rounded: every figure of the brief is one of the
result's. Text that is not a JSON object (an error's message) is left as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

_TIMESTAMP = re.compile(
    r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}):\d{2}(?:\.\d+)?(?:Z|[+-]00:?00)$")
_MONEY = "_usd"


def brief(content: str, focus: str = "") -> str:
    """``content`` (a tool result) as short lines, when it is a JSON object; else as is.
    ``focus`` is the operator's question: when it names some rows of a breakdown, only
    those rows are given (see :func:`_named_rows`)."""
    try:
        value = json.loads(content)
    except ValueError:
        return content
    if not isinstance(value, dict) or not value:
        return content
    if value.get("ok") is True:  # a memory tool's success flag, not an answer
        value = {k: v for k, v in value.items() if k != "ok"} or value
    named = _named_rows(value, focus)
    if named:
        value = {k: v for k, v in value.items()
                 if not k.startswith(("total_", "by_")) and k != "inferences"}
        return "\n".join([f"asked about: {_row(row)}" for row in named]
                         + _object_lines(value))
    return "\n".join(_object_lines(value))


_NAME_PART = re.compile(r"[^\W_]+", re.UNICODE)
_NAME_SPLIT = re.compile(r"[:/@]")


def _names(row: Mapping[str, Any]) -> set[str]:
    """The words a question may name a row by: each text value whole, each of its parts
    after a provider prefix (``openai:gpt-4o-mini``: ``gpt-4o-mini``), and each word of
    three letters or more that is not only digits (``claude``, ``sonnet``)."""
    out: set[str] = set()
    for value in row.values():
        if not isinstance(value, str) or not value.strip():
            continue
        text = value.casefold()
        out.add(text)
        out.update(p for p in _NAME_SPLIT.split(text) if len(p) >= 3)
        out.update(w for w in _NAME_PART.findall(text) if len(w) >= 3 and not w.isdigit())
    return out


def _says(question: str, name: str) -> bool:
    """Whether ``question`` (casefolded) holds ``name`` as a word of its own: not inside
    a longer Latin word (``support`` in ``supported``), though Japanese may touch it."""
    return re.search(rf"(?<![a-z0-9]){re.escape(name)}(?![a-z0-9])", question) is not None


def _named_rows(value: Mapping[str, Any], focus: str) -> list[Mapping[str, Any]]:
    """The rows of the result's breakdowns (``by_*`` lists of objects) that ``focus``
    names, when it names some of them but not all. Asked what one model or route cost,
    the 1.5B model answered with the period's total line, or with the first row."""
    question = focus.casefold()
    if not question.strip():
        return []
    out: list[Mapping[str, Any]] = []
    for key, rows in value.items():
        if not key.startswith("by_") or not isinstance(rows, list) or len(rows) < 2:
            continue
        objects = [r for r in rows if isinstance(r, Mapping)]
        hits = [r for r in objects if any(_says(question, n) for n in _names(r))]
        if hits and len(hits) < len(objects):
            out += hits
    return out


def _label(key: str) -> str:
    name = key[: -len(_MONEY)] if key.endswith(_MONEY) else key
    return name.replace("_", " ").strip() or key


def _scalar(key: str, value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        text = format(Decimal(repr(value)), "f") if isinstance(value, float) else str(value)
        return f"${text}" if key.endswith(_MONEY) else text
    if isinstance(value, str):
        match = _TIMESTAMP.match(value)
        return f"{match.group(1)} {match.group(2)} UTC" if match else value
    return json.dumps(value, ensure_ascii=False)


def _row(item: Any) -> str:
    if isinstance(item, Mapping):
        return ", ".join(f"{_label(k)} {_inline(k, v)}" for k, v in _row_fields(item))
    return _scalar("", item)


def _row_fields(row: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The fields of one row worth a reader's tokens: none empty, none repeating an
    earlier field's value (all of them when that would leave nothing)."""
    kept: list[tuple[str, Any]] = []
    for key, value in row.items():
        if value is None or value == [] or value == {}:
            continue
        if any(value == v and type(value) is type(v) and not isinstance(v, bool | int | float)
               for _, v in kept):
            continue
        kept.append((key, value))
    return kept or list(row.items())


def _inline(key: str, value: Any) -> str:
    if isinstance(value, Mapping):
        return "(" + _row(value) + ")" if value else "none"
    if isinstance(value, list):
        return "; ".join(_row(v) for v in value) if value else "none"
    return _scalar(key, value)


def _totals(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object's own figures by name, ``total_x`` also as ``x``."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value
            if key.startswith("total_"):
                out[key[len("total_"):]] = value
    return out


def _repeats_totals(rows: Sequence[Any], totals: Mapping[str, Any]) -> bool:
    """Whether ``rows`` is one object whose every figure is the same-named total."""
    if len(rows) != 1 or not isinstance(rows[0], Mapping):
        return False
    figures = {k: v for k, v in rows[0].items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    return bool(figures) and all(k in totals and totals[k] == v for k, v in figures.items())


def _object_lines(obj: Mapping[str, Any], indent: str = "") -> list[str]:
    totals = _totals(obj)
    lines: list[str] = []
    for key, value in obj.items():
        label = _label(key)
        if isinstance(value, list) and value:
            if _repeats_totals(value, totals):
                names = ", ".join(f"{_label(k)} {_scalar(k, v)}" for k, v in value[0].items()
                                  if not isinstance(v, int | float) or isinstance(v, bool))
                lines.append(f"{indent}{label}: {names or 'one'} (all of it)")
                continue
            lines.append(f"{indent}{label}:")
            lines += [f"{indent}- {_row(item)}" for item in value]
        elif isinstance(value, Mapping) and value:
            lines.append(f"{indent}{label}:")
            lines += _object_lines(value, indent + "  ")
        else:
            lines.append(f"{indent}{label}: {_inline(key, value)}")
    return lines
