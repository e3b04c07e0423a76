"""The answer on a terminal as it is generated (``overt ask`` and ``overt chat``).

Deltas are written and flushed as they come. A reset (the text shown was not
the answer: the model went on to call a tool, a plugin reissued the call, the
reply was replaced; see :mod:`overt.engine.answer_stream`) erases what was
shown, with ANSI cursor movement, counting the rows it took at the terminal's
width (wide East Asian characters count two columns). Text taller than the
screen cannot be erased: a line then says that what is above it was withdrawn.
Once the turn is over, what the terminal shows is the recorded reply.

Only used when standard output is a terminal and ``--no-stream`` is not given:
otherwise the commands print the reply once, as they always have.
"""

from __future__ import annotations

import shutil
import unicodedata
from typing import TextIO

from overt.engine.answer_stream import AnswerDelta, AnswerEvent


def columns(text: str) -> int:
    """Columns ``text`` takes on a terminal (wide characters 2, combining marks 0)."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def rows(text: str, width: int) -> int:
    """Rows ``text`` takes on a terminal ``width`` columns wide."""
    width = max(1, width)
    return sum(max(1, -(-columns(line) // width)) for line in text.split("\n"))


class TerminalAnswer:
    """An answer sink (``on_answer=``) writing to ``out`` after ``prefix``."""

    def __init__(self, out: TextIO, prefix: str = "") -> None:
        self.out = out
        self.prefix = prefix
        self.shown = ""
        self.started = False

    def __call__(self, event: AnswerEvent) -> None:
        if not self.started:
            self.started = True
            self.out.write(self.prefix)
        if isinstance(event, AnswerDelta):
            self.shown += event.text
            self.out.write(event.text)
        else:
            self._erase(event.reason)
        self.out.flush()

    def _erase(self, reason: str) -> None:
        size = shutil.get_terminal_size()
        taken = rows(self.prefix + self.shown, size.columns)
        if taken > size.lines - 1:
            self.out.write(f"\n[withdrawn: not the answer ({reason})]\n{self.prefix}")
        else:
            up = f"\x1b[{taken - 1}F" if taken > 1 else "\r"
            self.out.write(f"{up}\x1b[J{self.prefix}")
        self.shown = ""

    def finish(self, text: str) -> None:
        """End the answer's line; ``text`` is the reply (written if nothing streamed)."""
        if not self.started:
            self.out.write(self.prefix + text)
        self.out.write("\n")
        self.out.flush()
