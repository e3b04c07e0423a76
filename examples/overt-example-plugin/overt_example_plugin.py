"""An example overt plugin: one tool and one block rule.

Install it (``pip install ./examples/overt-example-plugin``) and enable it by
its entry-point name: ``OVERT_PLUGINS_ENABLED=example overt ask "..."``. Or,
without installing, offer the file and enable it by its stem:
``overt --plugin-file overt_example_plugin.py --enable-plugin overt_example_plugin ...``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from overt.hooks import Block, hookimpl
from overt.tools import Tool, tool


@tool(read_only=True, inline=True)
def utc_now() -> str:
    """The current date and time in UTC, as ISO 8601.

    Use when the operator asks what time or date it is.
    """
    return datetime.now(UTC).isoformat(timespec="seconds")


@hookimpl
def register_tools() -> list[Tool]:
    """The tool this plugin adds."""
    return [utc_now]


@hookimpl
def pre_tool_call(tool_name: str, args: dict[str, Any]) -> Block | None:
    """Block usage reports over all time: they scan the whole ledger. Bounded periods pass."""
    if tool_name == "get_usage" and args.get("period") == "all":
        return Block("usage_history_blocked",
                     "usage over all time is not available here; ask for 30d or less")
    return None
