"""The adapters take their options from models/options.py, never from the catalog
(resolve.py imports the adapters; an import back would be a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import overt.models

MODELS = Path(overt.models.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_module_in_models_imports_the_catalog_back() -> None:
    importers = [path.name for path in sorted(MODELS.glob("*.py"))
                 if path.name != "resolve.py" and "overt.models.resolve" in _imported_modules(path)]
    assert importers == []


def test_the_adapters_take_their_options_from_the_options_module() -> None:
    for name in ("anthropic.py", "openai_compat.py"):
        assert "overt.models.options" in _imported_modules(MODELS / name)
