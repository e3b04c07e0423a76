from __future__ import annotations

import overt


def test_the_public_surface_is_sorted_and_every_name_exists() -> None:
    assert overt.__all__ == sorted(overt.__all__)
    for name in overt.__all__:
        assert hasattr(overt, name), name


def test_every_public_name_is_listed() -> None:
    public = {n for n in vars(overt) if not n.startswith("_") and n not in {
        "annotations", "errors", "types", "events", "ids", "clock", "config", "runtime",
        "tools", "engine", "ledger", "models", "prompts", "channels", "cli"}}
    assert public <= set(overt.__all__) | {"__version__"}
