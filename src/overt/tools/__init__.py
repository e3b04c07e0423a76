"""Tools: the ``@tool`` decorator, the registry, and overt's built-in tools."""

from overt.tools.base import Tool, ToolContext, make_tool, tool
from overt.tools.registry import ToolRegistry

__all__ = ["Tool", "ToolContext", "ToolRegistry", "make_tool", "tool"]
