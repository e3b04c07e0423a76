"""overt's built-in plugin: its own tools and model schemes arrive through the same hooks.

Always registered, first (so called last), unless ``plugins.disabled`` names
``builtin``.
"""

from __future__ import annotations

from overt.hooks.specs import hookimpl
from overt.memory.tools import memory_tools
from overt.models.resolve import ModelProvider, builtin_providers
from overt.tools.base import Tool
from overt.tools.builtin import builtin_tools


@hookimpl
def register_tools() -> list[Tool]:
    """``get_operational_state``, ``get_usage`` and the memory tools (``node_*``, ``link_*``)."""
    return [*builtin_tools(), *memory_tools()]


@hookimpl
def register_models() -> list[ModelProvider]:
    """The ``local`` and ``scripted`` model schemes."""
    return builtin_providers()
