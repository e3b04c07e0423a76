"""The tool registry: tools by name, and the specs offered to a model.

Most entries are :class:`Tool` values (a function the registry dispatches to).
A plugin may also register a bare :class:`~overt.types.ToolSpec`: the tool is
offered to the model, and its result must come from a plugin's
``pre_tool_call_can_provide_result`` hook, since there is nothing to dispatch to.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from overt.errors import UsageError
from overt.tools.base import Tool
from overt.types import ToolSpec


class ToolRegistry:
    """Tools by name. Registering a name twice is a :class:`UsageError`."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: dict[str, ToolSpec] = {}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``.

        Raises:
            UsageError: a tool of that name is already registered.
        """
        if not isinstance(tool, Tool):
            raise UsageError(f"not a tool: {tool!r} (decorate the function with @tool)")
        self._claim(tool.name)
        self._tools[tool.name] = tool
        self._specs[tool.name] = tool.spec
        return tool

    def register_spec(self, spec: ToolSpec) -> ToolSpec:
        """Offer a tool with no function behind it (a plugin provides its results).

        Raises:
            UsageError: a tool of that name is already registered.
        """
        if not isinstance(spec, ToolSpec):
            raise UsageError(f"not a tool spec: {spec!r}")
        self._claim(spec.name)
        self._specs[spec.name] = spec
        return spec

    def _claim(self, name: str) -> None:
        if name in self._specs:
            raise UsageError(f"a tool named {name!r} is already registered")

    def spec(self, name: str) -> ToolSpec | None:
        """What the model is told about ``name`` (None: not registered)."""
        return self._specs.get(name)

    def get(self, name: str) -> Tool | None:
        """The tool to dispatch to, or None (unknown, or a spec-only tool)."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(self._specs.values())
