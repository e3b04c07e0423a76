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


def test_what_the_readme_imports_comes_from_overt_itself() -> None:
    assert overt.__all__ == [
        "AnswerDelta", "AnswerReset", "Config", "ConfigError", "ExtraMissingError",
        "FunctionModel", "IncomingMessage",
        "LedgerError", "LedgerIntegrityError", "Message", "ModelError", "OvertError",
        "ResponseResult", "Runtime", "ScriptedModel", "ToolCall", "ToolContext", "ToolError",
        "Usage", "UsageError", "__version__", "open_ledger", "tool"]
    from overt import (  # noqa: F401  the README's own import line
        Config,
        FunctionModel,
        IncomingMessage,
        Runtime,
        ScriptedModel,
        ToolContext,
        open_ledger,
        tool,
    )
