"""No import cycle among overt's modules, hidden or not; no feature package imports
the configuration.

Every ``import`` of every module under ``src/overt`` counts: at module level, inside
functions and under ``if TYPE_CHECKING:`` (a function-level import hides a cycle from
the interpreter, a type-only one hides it from everything but the design: two modules
that name each other's types are one module in two files).
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


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The overt modules ``name`` imports (a name imported from a package is the
    package, unless it is a submodule)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(tree):
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


def test_the_walk_sees_imports_inside_functions_and_for_type_checking() -> None:
    """The walk finds what the cycles it exists for were made of: imports hidden in
    functions (channels.http imports the MCP extra's module so, on purpose) and under
    ``if TYPE_CHECKING:`` (engine.direct names the engine's type so)."""
    assert "overt.channels.mcp_server" in graph()["overt.channels.http"]
    assert "overt.engine.loop" in graph()["overt.engine.direct"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


ASSEMBLERS = ("overt.config", "overt.runtime", "overt.cli", "overt.evals.runner")
"""What may import ``overt.config`` besides the package's public face (``overt``): the
configuration itself, the composition root, the command line, and the eval runner (it
composes a runtime per case from a config)."""


def test_no_feature_package_imports_the_configuration() -> None:
    """Each feature's settings live in its own package (the budget in the engine, the
    policy's in the gate, a model alias with the model options); ``config`` imports
    them to assemble a :class:`~overt.config.Config`, never the other way."""
    importers = sorted(
        name for name, targets in graph().items()
        if name != "overt" and not any(_within(name, a) for a in ASSEMBLERS)
        and any(_within(t, "overt.config") for t in targets))
    assert importers == []
