"""The system prompt shipped with overt, and how it is rendered."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from string import Template

from overt.errors import ConfigError
from overt.types import ToolSpec


def default_template() -> str:
    """The shipped system prompt template (``$tools``, ``$max_tool_calls``)."""
    return resources.files("overt.prompts").joinpath("system.md").read_text(encoding="utf-8")


def load_template(path: str | Path | None) -> str:
    """The template at ``path``, or the shipped one when ``path`` is None.

    Raises:
        ConfigError: the file cannot be read.
    """
    if path is None:
        return default_template()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read system prompt {path}: {exc}") from exc


def render(template: str, tools: tuple[ToolSpec, ...], max_tool_calls: int) -> str:
    """The system prompt for a turn offering ``tools``."""
    lines = [f"- `{t.name}`: {t.description}" for t in tools] or ["(no tools are offered)"]
    return Template(template).safe_substitute(
        tools="\n".join(lines), max_tool_calls=str(max_tool_calls))
