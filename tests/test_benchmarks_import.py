"""Every benchmark module imports: ``make bench`` is run by hand, not by CI, so a
renamed engine or ledger name would otherwise break it unseen (``_Turn`` did)."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

MODULES = sorted(p.stem for p in (Path(__file__).parent.parent / "benchmarks").glob("*.py")
                 if p.stem != "__init__")


@pytest.mark.parametrize("name", MODULES)
def test_the_benchmark_module_imports(name: str) -> None:
    importlib.import_module(f"benchmarks.{name}")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _bench_installs() -> set[str]:
    """The distributions ``make bench`` installs: overt's own dependencies, those of the
    extras its ``install`` and ``bench`` targets name, and the packages they name."""
    root = Path(__file__).parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    makefile = (root / "Makefile").read_text()
    names = {_requirement_name(r) for r in project["dependencies"]}
    for target in ("install", "bench"):
        body = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M)
        assert body is not None, f"no {target} target in the Makefile"
        for spec in re.findall(r"'([^']+)'", body.group(1)):
            if spec.startswith(".["):
                for extra in spec[2:-1].split(","):
                    names |= {_requirement_name(r) for r in extras[extra]}
            else:
                names.add(_requirement_name(spec))
    return names


@pytest.mark.slow
def test_every_package_a_benchmark_imports_is_installed_by_make_bench() -> None:
    """``make bench`` runs in a venv without the dev extra: a benchmark importing a
    package only ``make test`` installs broke it from a clean clone (``httpx2``)."""
    installed = _bench_installs()
    owners = importlib.metadata.packages_distributions()
    missing = {}
    for path in (Path(__file__).parent.parent / "benchmarks").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module] if isinstance(node, ast.ImportFrom) and node.module
                       and not node.level else [])
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("overt", "benchmarks"):
                    continue
                dists = {d.lower().replace("_", "-") for d in owners.get(top, [top])}
                if not dists & installed:
                    missing[f"{path.name}: {top}"] = sorted(dists)
    assert not missing, f"imported by a benchmark, not installed by `make bench`: {missing}"
