"""Every benchmark module imports: ``make bench`` is run by hand, not by CI, so a
renamed engine or ledger name would otherwise break it unseen (``_Turn`` did)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

MODULES = sorted(p.stem for p in (Path(__file__).parent.parent / "benchmarks").glob("*.py")
                 if p.stem != "__init__")


@pytest.mark.parametrize("name", MODULES)
def test_the_benchmark_module_imports(name: str) -> None:
    importlib.import_module(f"benchmarks.{name}")
