"""``import overt`` works on Windows: no module imports a POSIX-only module at its top level."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_no_module_imports_a_posix_only_module_at_its_top_level() -> None:
    found = {str(path.relative_to(SRC)): sorted(_top_level_imports(path) & POSIX_ONLY)
             for path in sorted(SRC.rglob("*.py"))}
    assert {name: mods for name, mods in found.items() if mods} == {}


# Run in a process of its own: every overt module imported with the POSIX-only
# modules refused to overt's own imports (the standard library and third-party
# packages keep theirs: on Windows they take their own branches), so an import
# nested in a class body, an ``if`` or a ``try`` at module level is caught too.
_SHIM = """
import builtins, importlib, pkgutil, sys  # noqa: E401
BLOCK = frozenset(sys.argv[1].split(","))
real_import = builtins.__import__

def guarded(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if (level == 0 and name.split(".")[0] in BLOCK
            and (importer == "overt" or importer.startswith("overt."))):
        raise ModuleNotFoundError(f"{importer} imports {name}, which Windows lacks", name=name)
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = guarded
real_import_module = importlib.import_module

def guarded_module(name, package=None):
    caller = sys._getframe(1).f_globals.get("__name__") or ""
    if name.split(".")[0] in BLOCK and (caller == "overt" or caller.startswith("overt.")):
        raise ModuleNotFoundError(f"{caller} imports {name}, which Windows lacks", name=name)
    return real_import_module(name, package)

importlib.import_module = guarded_module
for probe in ("import fcntl", "import importlib; importlib.import_module('pwd')"):
    try:
        exec(probe, {"__name__": "overt._probe"})
    except ModuleNotFoundError:
        continue
    sys.exit(f"the shim let an overt module run {probe!r}")
import overt
# every module under src/overt, namespace packages (overt.engine has no __init__.py,
# which pkgutil.walk_packages does not enter) included
names = [m.name for m in pkgutil.walk_packages(overt.__path__, "overt.")]
names += [n for n in sys.argv[2].split(",") if n not in names]
names = [n for n in names if not n.endswith(".__main__")]
failed = []
for name in names:
    try:
        real_import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names))
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow
def test_every_overt_module_imports_with_the_posix_only_modules_refused() -> None:
    import subprocess
    import sys

    blocked = ",".join(sorted(POSIX_ONLY | {"uvloop"}))
    modules = sorted(".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(
        ".__init__") for p in SRC.rglob("*.py"))
    done = subprocess.run([sys.executable, "-c", _SHIM, blocked, ",".join(modules)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert int(done.stdout.split()[0]) == len(modules) - 1  # all but overt.cli.__main__
