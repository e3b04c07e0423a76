"""Readers use the typed events: outside the ledger (which stores and checks an
entry's data) and the decoding of entries into events (``overt.events``), no
module reads a field of an entry's ``data`` by name (``entry.data["x"]``,
``entry.data.get("x")``, or ``d = entry.data`` to read it later). It reads
``entry.event(Kind)`` and the event's typed fields instead, so a field renamed or
retyped in ``overt.events`` is a type error, not a silent ``None``. Passing the
whole ``data`` on as it is (to print or serialise the record) is not a read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import overt

SRC = Path(overt.__file__).parent
DECODING = ("ledger/", "events.py")


def _data(node: ast.AST) -> bool:
    """Whether ``node`` is ``<something other than self>.data``."""
    return (isinstance(node, ast.Attribute) and node.attr == "data"
            and not (isinstance(node.value, ast.Name) and node.value.id == "self"))


def field_reads(source: str) -> list[int]:
    """The lines of ``source`` that read an entry's data field by field."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source)) if _reads(node))


def _reads(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):
        return _data(node.value)
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and _data(node.func.value))
    return isinstance(node, ast.Assign) and _data(node.value)


def test_the_check_finds_each_way_of_reading_a_field() -> None:
    assert field_reads("a = e.data['x']\nb = e.data.get('y')\nd = e.data\n"
                       "print(e.data)\nf(self.data['z'])\nev.data()\n") == [1, 2, 3]


@pytest.mark.slow
def test_no_reader_outside_the_ledger_reads_entry_data_by_field() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name.startswith(DECODING):
            continue
        lines = field_reads(path.read_text(encoding="utf-8"))
        if lines:
            found[name] = lines
    assert found == {}
