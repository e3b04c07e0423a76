"""A line diff of two texts for a page: which lines a revision kept, removed and added.

The result is plain data (an operation and the line's text); the template
escapes the text, so a body holding markup is shown as the characters it is.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

Op = Literal["same", "del", "add", "gap"]
CONTEXT = 3
"""Unchanged lines kept around each change; longer runs fold into a ``gap`` line."""


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the diff: ``op`` and the line's ``text`` (for ``gap``, how many
    unchanged lines were folded)."""

    op: Op
    text: str


@dataclass(frozen=True, slots=True)
class Diff:
    lines: tuple[Line, ...]
    added: int
    removed: int

    @property
    def unchanged(self) -> bool:
        return not (self.added or self.removed)


def line_diff(old: str, new: str, *, context: int = CONTEXT) -> Diff:
    """The lines of ``new`` against ``old``, with ``context`` unchanged lines kept
    around each change."""
    a, b = old.splitlines(), new.splitlines()
    out: list[Line] = []
    added = removed = 0
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for n, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            run = a[i1:i2]
            head = run[:context] if n > 0 else []
            tail = run[-context:] if n < len(ops) - 1 else []
            if len(run) <= len(head) + len(tail) or len(run) <= 2 * context:
                out.extend(Line("same", t) for t in run)
                continue
            out.extend(Line("same", t) for t in head)
            folded = len(run) - len(head) - len(tail)
            out.append(Line("gap", f"{folded} unchanged line{'s' if folded != 1 else ''}"))
            out.extend(Line("same", t) for t in tail)
            continue
        if tag in ("delete", "replace"):
            out.extend(Line("del", t) for t in a[i1:i2])
            removed += i2 - i1
        if tag in ("insert", "replace"):
            out.extend(Line("add", t) for t in b[j1:j2])
            added += j2 - j1
    return Diff(tuple(out), added, removed)
