"""Figures (numbers) in text, and whether an answer's figures come from somewhere.

An answer may only state figures that a tool returned, the operator wrote, or
the case allows (a sum the question asks for). Extraction reads ASCII and
full-width digits, thousands separators (``2,313``), decimals (``0.0123``),
``k``/``M`` suffixes and Japanese numerals (``二千三百十三``, ``1万2千``,
``三件``).

A figure is a number standing on its own: digits glued to letters
(``qwen2.5``, ``24h``, an id like ``01J9Z…``) are names, not figures, in an
answer and in its sources alike (a period ``7d`` does not ground "7
approvals"); an ISO timestamp's ``T`` and ``Z`` separate figures. In an
answer, a list marker at the start of a line (``1.``) is not a figure.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

_KANJI_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6,
                 "七": 7, "八": 8, "九": 9}
_KANJI_SMALL = {"十": 10, "百": 100, "千": 1000}
_KANJI_LARGE = {"万": 10_000, "億": 100_000_000}
_COUNTERS = "件個回円人本台日週月年時分秒つ度枚"

_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])(?<![A-Za-z]-)"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<suffix>[kKM](?![A-Za-z0-9_]))?"
    r"(?![A-Za-z0-9_])"
)
_KANJI_NUMBER = re.compile(r"[0-9〇零一二三四五六七八九十百千万億]+")
_LIST_MARKER = re.compile(r"(?m)^\s*\d{1,2}[.)]\s")
_TIMESTAMP_MARK = re.compile(r"(?<=\d)[TZ](?![A-Za-z])")
_SUFFIX = {"k": 1_000, "K": 1_000, "M": 1_000_000}


def _normal(text: str) -> str:
    """Full-width digits and punctuation folded to ASCII (NFKC), kanji kept."""
    return unicodedata.normalize("NFKC", text)


def kanji_value(text: str) -> int | None:
    """The value of a Japanese numeral (``二千三百十三`` 2313, ``1万2千`` 12000), or None."""
    total = 0
    section = 0
    digit: int | None = None
    digits = ""
    for char in text:
        if char.isdigit():
            digits += char
            continue
        if digits:
            digit, digits = int(digits), ""
        if char in _KANJI_DIGITS:
            digit = _KANJI_DIGITS[char] if digit is None else digit * 10 + _KANJI_DIGITS[char]
        elif char in _KANJI_SMALL:
            section += (1 if digit is None else digit) * _KANJI_SMALL[char]
            digit = None
        elif char in _KANJI_LARGE:
            total += (section + (digit or 0) or 1) * _KANJI_LARGE[char]
            section, digit = 0, None
        else:
            return None
    if digits:
        digit = int(digits)
    return total + section + (digit or 0)


def _value(match: re.Match[str]) -> Decimal:
    value = Decimal(match.group("num").replace(",", ""))
    suffix = match.group("suffix")
    return value * _SUFFIX[suffix] if suffix else value


def answer_figures(text: str) -> list[Decimal]:
    """The figures an answer states, in order."""
    text = _LIST_MARKER.sub(" ", _normal(text))
    found: list[tuple[int, Decimal]] = []
    taken: list[tuple[int, int]] = []
    for match in _KANJI_NUMBER.finditer(text):
        run = match.group()
        if run.isdigit():
            continue
        if len(run) == 1 and run in _KANJI_DIGITS:
            after = text[match.end():match.end() + 1]
            if not after or after not in _COUNTERS:
                continue  # 一 alone is a word (一つ has a counter, 一部 does not)
        value = kanji_value(run)
        if value is not None:
            found.append((match.start(), Decimal(value)))
            taken.append(match.span())
    for match in _NUMBER.finditer(text):
        if any(start <= match.start() < end for start, end in taken):
            continue
        found.append((match.start(), _value(match)))
    return [value for _, value in sorted(found, key=lambda pair: pair[0])]


def source_figures(texts: Iterable[str]) -> set[Decimal]:
    """Every number in ``texts`` (tool results, the question, earlier messages)."""
    out: set[Decimal] = set()
    for text in texts:
        normal = _TIMESTAMP_MARK.sub(" ", _normal(text))
        for match in _NUMBER.finditer(normal):
            out.add(_value(match))
        for match in _KANJI_NUMBER.finditer(normal):
            value = None if match.group().isdigit() else kanji_value(match.group())
            if value is not None:
                out.add(Decimal(value))
    return out


def _decimals(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def grounded(figure: Decimal, sources: set[Decimal]) -> bool:
    """Whether ``figure`` is one of ``sources``, as written or rounded to the places
    the answer gives (``$0.01`` for ``0.0123``, ``2.3k`` for ``2313``)."""
    if figure in sources:
        return True
    places = _decimals(figure)
    quantum = Decimal(1).scaleb(-places)
    return any(_rounds_to(source, figure, quantum) for source in sources)


def _rounds_to(source: Decimal, figure: Decimal, quantum: Decimal) -> bool:
    try:
        if source.quantize(quantum) == figure:
            return True
        # 2.3k, 1.2M written for 2313, 1234567
        return any(figure >= scale and (source / scale).quantize(quantum) * scale == figure
                   for scale in (1_000, 1_000_000))
    except InvalidOperation:  # too many digits to round at that place: not this one
        return False


def invented(answer: str, sources: Iterable[str], allowed: Iterable[float | int] = ()) -> list[str]:
    """The figures of ``answer`` found in none of ``sources`` nor ``allowed``, as written."""
    pool = source_figures(sources) | {Decimal(str(a)) for a in allowed}
    return [_show(f) for f in answer_figures(answer) if not grounded(f, pool)]


def _show(value: Decimal) -> str:
    return format(value.normalize(), "f")
