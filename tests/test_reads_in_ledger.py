"""Every package reads the record through the ledger's typed reads
(:mod:`overt.ledger.reads`): outside ``overt/ledger/``, no module writes SQL, sends a
statement through a ledger's ``select``, probes a ledger for ``select``, imports the
dialects (``overt.ledger.sql``) or tells the backends apart by ``backend``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import overt

SRC = Path(overt.__file__).parent
OWNER = "ledger/"
IMAP = {"channels/email.py": 1}
"""Modules whose ``select`` calls are not a ledger's, and how many: the email channel
selects an IMAP mailbox."""
_SQL = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(?:audit_log|content_blobs|memory_\w+|"
                  r"merkle_nodes|trail_index)\b", re.IGNORECASE)
"""A statement on the ledger's tables (a witness's own database is not the ledger)."""


def _text(node: ast.AST) -> str | None:
    """The literal text of a string or an f-string (its constant parts)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(v.value for v in node.values
                        if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def findings(source: str) -> list[str]:
    """What in ``source`` reads the record other than through the typed reads, with
    its line."""
    tree = ast.parse(source)
    docs = {id(n.value) for n in ast.walk(tree)  # docstrings may name the tables
            if isinstance(n, ast.Expr) and _text(n.value) is not None}
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        text = _text(node) if id(node) not in docs else None
        if text is not None and _SQL.search(text):
            found.append(f"{line}: SQL")
        elif isinstance(node, ast.ImportFrom) and (
                node.module == "overt.ledger.sql" or (node.module == "overt.ledger"
                and any(a.name == "sql" for a in node.names))):
            found.append(f"{line}: the dialects imported")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "select":
            found.append(f"{line}: select")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "hasattr") and len(node.args) > 1 and \
                _text(node.args[1]) == "select":
            found.append(f"{line}: a probe for select")
        elif isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Attribute) and side.attr == "backend"
                for side in (node.left, *node.comparators)):
            found.append(f"{line}: backend compared")
    return sorted(set(found), key=lambda f: (int(f.split(":")[0]), f))


def test_the_check_finds_each_way_of_reading_around_the_typed_reads() -> None:
    source = '''
"""A docstring may say SELECT x FROM audit_log."""
from overt.ledger.sql import SQLITE
from overt.ledger import sql
rows = await ledger.select(f"SELECT seq FROM audit_log WHERE seq = {ph}", (1,))
select = getattr(ledger, "select", None)
d = SQLITE if ledger.backend == "sqlite" else POSTGRES
q = "DELETE FROM memory_nodes"
'''
    assert findings(source) == ["3: the dialects imported", "4: the dialects imported",
                                "5: SQL", "5: select", "6: a probe for select",
                                "7: backend compared", "8: SQL"]


def test_no_package_outside_the_ledger_reads_around_its_typed_reads() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name.startswith(OWNER):
            continue
        lines = findings(path.read_text(encoding="utf-8"))
        imap = IMAP.get(name, 0)
        selects = [f for f in lines if f.endswith(": select")]
        if 0 < len(selects) <= imap:
            lines = [f for f in lines if f not in selects]
        if lines:
            found[name] = lines
    assert found == {}
