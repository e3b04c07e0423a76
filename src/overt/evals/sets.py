"""The case sets shipped with overt, by name.

- ``tuning`` (``cases.json``): the suite the embedded model's prompt, tool wording and
  decoding policy were worked out on. Its score says the tuning holds, not how the
  model does on questions nobody tuned against.
- ``locked`` (``locked.json``): written apart, before the changes it measures, and
  never read case by case while changing a prompt, a heuristic or a tool description.
  Its score is the headline; ``overt eval`` prints only its totals and its per-class
  table (the ``--json`` file holds every case).

A set whose file is not shipped is left out of :func:`shipped_sets`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from overt.errors import UsageError

FILES: dict[str, str] = {"tuning": "cases.json", "locked": "locked.json"}
"""Each shipped set's file in the ``overt.evals`` package."""

LOCKED = "locked"
"""The set whose cases are not printed one by one."""


def set_path(name: str) -> Path:
    """The file of the shipped set ``name``.

    Raises:
        UsageError: no set has that name, or its file is not shipped.
    """
    if name not in FILES:
        raise UsageError(f"no eval set {name!r}; known: {', '.join(FILES)}")
    path = Path(str(resources.files("overt.evals").joinpath(FILES[name])))
    if not path.is_file():
        raise UsageError(f"the eval set {name!r} is not shipped with this overt ({path})")
    return path


def shipped_sets() -> dict[str, Path]:
    """Every shipped set's file, by name, in the order of :data:`FILES`."""
    out: dict[str, Path] = {}
    for name, file in FILES.items():
        path = Path(str(resources.files("overt.evals").joinpath(file)))
        if path.is_file():
            out[name] = path
    return out
