"""The tool registry: tools by name, and the specs offered to a model."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from overt.errors import UsageError
from overt.tools.base import Tool
from overt.types import ToolSpec


class ToolRegistry:
    """Tools by name. Registering a name twice is a :class:`UsageError`."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``.

        Raises:
            UsageError: a tool of that name is already registered.
        """
        if not isinstance(tool, Tool):
            raise UsageError(f"not a tool: {tool!r} (decorate the function with @tool)")
        if tool.name in self._tools:
            raise UsageError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self._tools.values())
