"""``import overt`` works on Windows: no module imports a POSIX-only module at its top level."""

from __future__ import annotations

import ast
from pathlib import Path

import overt

SRC = Path(overt.__file__).parent
POSIX_ONLY = frozenset({"fcntl", "termios", "tty", "pty", "resource", "pwd", "grp", "posix",
                        "crypt", "syslog", "readline"})


def _top_level_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_imports_a_posix_only_module_at_its_top_level() -> None:
    found = {str(path.relative_to(SRC)): sorted(_top_level_imports(path) & POSIX_ONLY)
             for path in sorted(SRC.rglob("*.py"))}
    assert {name: mods for name, mods in found.items() if mods} == {}
