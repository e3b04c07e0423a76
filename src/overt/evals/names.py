"""Named facts in an answer, and whether each comes from somewhere.

Figures are not the only thing a model invents (:mod:`.figures`): a host, a
ticket key, an address, the winner of a match. A named fact is

- an **identifier**: a run of ASCII letters, digits and ``. _ - @ /`` that
  holds both a letter and a digit (``db-stg-3``, ``OPS-2291``, ``gpt-4o``),
  an ``@`` (an address), or a dot between labels one of which is two letters
  or more (``example.com``, ``overt.toml``; not ``e.g``). A number with a
  short unit (``24h``, ``3pm``, ``2nd``, ``1.5B``) is a figure, not a name;
- a **proper name**: two or more capitalised words in a row (``Real Madrid``,
  ``Tokyo Tower``), the first word of a sentence left out (``Dear Team``,
  ``Best Regards`` are no names).

An identifier is grounded when a source holds it, without regard to case; a
proper name when each of its words is a word of a source ("Staging Cache"
from a note about the staging cache).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_IDENTIFIER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.@/-]*[A-Za-z0-9])?")
_UNIT = re.compile(r"^\d+(?:\.\d+)?[A-Za-z]{1,3}$")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"\d")
_LABEL = re.compile(r"^[A-Za-z]{2,}$")
_CAPITAL = re.compile(r"[A-Z][a-z]+(?:'s|’s)?")
_WORD = re.compile(r"[^\W_]+")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[-*•]\s+|\d+[.)]\s+)$")


def _is_identifier(token: str) -> bool:
    if _UNIT.match(token):
        return False
    if "@" in token:
        return True
    if _LETTER.search(token) and _DIGIT.search(token):
        return True
    labels = token.split(".")
    return len(labels) > 1 and all(labels) and any(_LABEL.match(label) for label in labels)


def identifiers(answer: str) -> list[str]:
    """The identifiers of ``answer``, in order."""
    text = unicodedata.normalize("NFKC", answer)
    return [m.group() for m in _IDENTIFIER.finditer(text) if _is_identifier(m.group())]


def proper_names(answer: str) -> list[str]:
    """The runs of two or more capitalised words of ``answer`` (a sentence's first
    word left out), in order."""
    text = unicodedata.normalize("NFKC", answer)
    names: list[str] = []
    run: list[str] = []
    end = -1
    for match in _CAPITAL.finditer(text):
        word = re.sub(r"['’]s$", "", match.group())
        after_letter = match.start() > 0 and text[match.start() - 1].isalnum()
        starts = bool(_SENTENCE_START.search(text[:match.start()]))
        joined = bool(run) and text[end:match.start()] == " "
        if after_letter:
            continue
        if not joined:
            if len(run) > 1:
                names.append(" ".join(run))
            run = []
            if starts:
                end = match.end()
                run = []
                continue
        run.append(word)
        end = match.end()
    if len(run) > 1:
        names.append(" ".join(run))
    return names


def invented_names(answer: str, sources: Iterable[str]) -> list[str]:
    """The named facts of ``answer`` found in none of ``sources``, as written."""
    texts = [unicodedata.normalize("NFKC", s).casefold() for s in sources]
    words = {w for text in texts for w in _WORD.findall(text)}
    out = [name for name in identifiers(answer)
           if not any(name.casefold() in text for text in texts)]
    out += [name for name in proper_names(answer)
            if not all(w.casefold() in words for w in name.split())]
    return list(dict.fromkeys(out))
