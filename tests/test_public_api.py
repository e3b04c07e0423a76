from __future__ import annotations

import types

import overt


def test_the_public_surface_is_sorted_and_every_name_exists() -> None:
    assert overt.__all__ == sorted(overt.__all__)
    for name in overt.__all__:
        assert hasattr(overt, name), name


def test_every_public_name_is_listed() -> None:
    public = {name for name, value in vars(overt).items()
              if not name.startswith("_") and name != "annotations"
              and not isinstance(value, types.ModuleType)}
    assert public <= set(overt.__all__)
