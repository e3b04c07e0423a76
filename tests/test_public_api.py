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
        "TurnError", "Usage", "UsageError", "__version__", "open_ledger", "tool"]
    from overt import (  # noqa: F401  the README's own import line (and the docs')
        Config,
        FunctionModel,
        IncomingMessage,
        Runtime,
        ScriptedModel,
        ToolContext,
        open_ledger,
        tool,
    )


def test_the_server_extra_installs_what_starlette_parses_forms_with() -> None:
    """The cockpit's login and approval forms go through Starlette's ``request.form()``,
    which needs python-multipart, an optional dependency of Starlette's own. Only the
    dev extra pulled it in (through mcp), so ``pip install 'overt[server]'`` served a
    login page whose form answered 500 (``make bench`` from a clean clone showed it)."""
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).parent.parent / "pyproject.toml"
    server = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["server"]
    assert any(r.startswith("python-multipart") for r in server), server
