"""Where each key of a TOML text is: ``{("routes", "cheap", "model"): 12, ...}``.

``tomllib`` reports a line only for syntax errors; to name the line of a
value that parses but does not validate, this scans the text itself. It
follows ``[table]`` and ``[[array]]`` headers, ``key =`` lines with dotted and
quoted keys, inline tables and arrays (their elements by index, also across
lines), strings of every kind, and comments. It is approximate on purpose:
on text ``tomllib`` accepts it finds every key; it never raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Path = tuple[str | int, ...]

_PART = r'(?:[A-Za-z0-9_\-]+|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\')'
_KEY = re.compile(rf"\s*({_PART}(?:\s*\.\s*{_PART})*)\s*")
_PARTS = re.compile(_PART)


def _key_parts(key: str) -> tuple[str, ...]:
    parts = []
    for raw in _PARTS.findall(key):
        if raw[:1] == '"':
            parts.append(raw[1:-1].encode().decode("unicode_escape"))
        elif raw[:1] == "'":
            parts.append(raw[1:-1])
        else:
            parts.append(raw)
    return tuple(parts)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.found: dict[Path, int] = {}
        self.arrays: dict[Path, int] = {}  # [[header]] occurrences

    def note(self, path: Path) -> None:
        for n in range(1, len(path) + 1):
            self.found.setdefault(path[:n], self.line)

    def advance(self, n: int) -> None:
        self.line += self.text.count("\n", self.pos, self.pos + n)
        self.pos += n

    def skip_string(self) -> None:
        text, pos = self.text, self.pos
        for quote in ('"""', "'''"):
            if text.startswith(quote, pos):
                end = pos + 3
                while True:
                    end = text.find(quote, end)
                    if end < 0:
                        self.advance(len(text) - pos)
                        return
                    if quote == "'''" or not _escaped(text, end):
                        break
                    end += 1
                while text.startswith(quote[0], end + 3):  # up to two quotes may close it
                    end += 1
                self.advance(end + 3 - pos)
                return
        quote, end = text[pos], pos + 1
        while end < len(text) and text[end] != quote and text[end] != "\n":
            end += 2 if quote == '"' and text[end] == "\\" else 1
        self.advance(min(end + 1, len(text)) - pos)

    def run(self) -> dict[Path, int]:
        text = self.text
        table: Path = ()
        # the open inline tables and arrays: (path, is_array, index of the current element)
        stack: list[tuple[Path, bool, int]] = []
        pending: Path | None = None  # the path of the value after `key =`
        expect_key = True
        while self.pos < len(text):
            c = text[self.pos]
            if c == "\n":
                expect_key = expect_key or not stack
                self.advance(1)
            elif c in " \t\r":
                self.pos += 1
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif expect_key and not stack and c == "[":
                table = self.header()
                expect_key = False
            elif expect_key and c != "}":
                match = _KEY.match(text, self.pos)
                if match is None or not text.startswith("=", match.end()):
                    self.pos += 1  # not a key after all: step over it
                    continue
                pending = (stack[-1][0] if stack else table) + _key_parts(match.group(1))
                self.note(pending)
                self.advance(match.end() + 1 - self.pos)
                expect_key = False
            elif c == ",":
                self.pos += 1
                if stack and stack[-1][1]:
                    path, _, index = stack[-1]
                    stack[-1] = (path, True, index + 1)
                elif stack:
                    expect_key = True
            elif c in "]}":
                self.pos += 1
                if stack:
                    stack.pop()
            else:
                path = self.value_path(stack, pending)
                pending = None
                if c == "{":
                    self.pos += 1
                    stack.append((path, False, 0))
                    expect_key = True
                elif c == "[":
                    self.pos += 1
                    stack.append((path, True, 0))
                elif c in "\"'":
                    self.skip_string()
                else:  # a number, a boolean, a date
                    while self.pos < len(text) and text[self.pos] not in ",]}\n#":
                        self.pos += 1
        return self.found

    def value_path(self, stack: list[tuple[Path, bool, int]], pending: Path | None) -> Path:
        """The path of the value that starts here (an array element gets its index)."""
        if pending is not None:
            return pending
        if stack and stack[-1][1]:
            element = (*stack[-1][0], stack[-1][2])
            self.note(element)
            return element
        return stack[-1][0] if stack else ()

    def header(self) -> Path:
        text = self.text
        double = text.startswith("[[", self.pos)
        start = self.pos + (2 if double else 1)
        match = _KEY.match(text, start)
        if match is None:
            self.pos = start
            return ()
        path: Path = _key_parts(match.group(1))
        if double:
            index = self.arrays.get(path, 0)
            self.arrays[path] = index + 1
            self.note(path)
            path = (*path, index)
        self.note(path)
        close = text.find("]]" if double else "]", match.end())
        self.pos = match.end() if close < 0 else close + (2 if double else 1)
        return path


def _escaped(text: str, at: int) -> bool:
    slashes = 0
    while at - slashes - 1 >= 0 and text[at - slashes - 1] == "\\":
        slashes += 1
    return slashes % 2 == 1


def key_lines(text: str) -> dict[Path, int]:
    """Every key path of ``text`` (and each prefix of it) to the line where it first appears.

    Array elements are keyed by index: ``("routes", "cheap", "fallback", 1)``.
    """
    return _Scanner(text).run()


def line_of(found: dict[Path, int], loc: Sequence[str | int]) -> int | None:
    """The line of ``loc``, or of its nearest enclosing key that has one."""
    path = tuple(loc)
    for n in range(len(path), 0, -1):
        line = found.get(path[:n])
        if line is not None:
            return line
    return None
