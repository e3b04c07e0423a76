"""What a test needs beyond Python and the core dependencies, one rule for all of it.

Outside CI, a test whose need is missing is skipped, saying what is missing. In CI
(env ``CI`` set, as ``.ci/run`` sets it), where ``make test`` installs the dev extras,
prepares the embedded model and starts the services, it fails instead: a silent skip
there would pass a suite that did not run.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def missing(reason: str) -> NoReturn:
    """Skip the calling test (or module) saying ``reason``; in CI, fail it."""
    if in_ci():
        pytest.fail(f"{reason} (CI must have it)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def module(name: str, reason: str | None = None) -> ModuleType:
    """``name`` imported, as :func:`pytest.importorskip`, but failing in CI."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(reason or f"{name} is not installed")
