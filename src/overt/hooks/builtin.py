"""overt's built-in plugin: its own tools and model schemes arrive through the same hooks.

Always registered, first (so called last), unless ``plugins.disabled`` names
``builtin``.
"""

from __future__ import annotations

from overt.hooks.specs import hookimpl
from overt.memory.kinds import MemoryKinds
from overt.memory.tools import memory_tools
from overt.models.resolve import ModelProvider, builtin_providers
from overt.tools.base import Tool
from overt.tools.builtin import builtin_tools


class Builtin:
    """The built-in plugin, its memory tools over ``memory``'s kinds (default: the
    built-in kinds; ``[memory]`` in ``overt.toml`` adds to them)."""

    def __init__(self, memory: MemoryKinds | None = None) -> None:
        self.memory = memory or MemoryKinds.builtin()

    @hookimpl
    def register_tools(self) -> list[Tool]:
        """``get_operational_state``, ``get_usage`` and the memory tools (``node_*``,
        ``link_*``)."""
        return [*builtin_tools(), *memory_tools(self.memory)]

    @hookimpl
    def register_models(self) -> list[ModelProvider]:
        """The ``local`` and ``scripted`` model schemes."""
        return builtin_providers()
