"""No import cycle among overt's modules, hidden or not.

Every ``import`` of every module under ``src/overt`` counts: at module level and
inside functions (a function-level import hides a cycle from the interpreter, not
from the design). Only imports under ``if TYPE_CHECKING:`` are left out: they are
never executed, and name types only.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in (SRC / "overt").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The overt modules ``name`` imports (a name imported from a package is the
    package, unless it is a submodule)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_only(tree)

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [owner(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else owner(base)
                       for a in node.names]
        else:
            continue
        yield from (t for t in targets if t is not None and t != name)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imports(name, path, known)) for name, path in known.items()}


@pytest.mark.slow
def test_overt_has_no_import_cycle() -> None:
    found = graph()
    assert cycles(found) == [], "import cycles: " + "; ".join(
        " <-> ".join(c) for c in cycles(found))


def test_the_walk_sees_imports_inside_functions() -> None:
    """The walk finds what the cycles it exists for were made of: imports hidden in
    functions (channels.http imports the MCP extra's module so, on purpose)."""
    assert "overt.channels.mcp_server" in graph()["overt.channels.http"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
