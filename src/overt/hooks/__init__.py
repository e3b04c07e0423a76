"""Plugins and hooks: extend, short-circuit and observe the loop, on the record.

Write a plugin with :data:`hookimpl` (see :mod:`overt.hooks.specs` for every
hook and its contract); enable it with ``plugins.enabled``.
"""

from overt.hooks.answers import Block, Reissue
from overt.hooks.calls import HookSet
from overt.hooks.manager import ENTRY_POINT_GROUP, PluginHost, PluginInfo, list_plugins
from overt.hooks.specs import HOOK_NAMES, hookimpl, hookspec

__all__ = [
    "ENTRY_POINT_GROUP",
    "HOOK_NAMES",
    "Block",
    "HookSet",
    "PluginHost",
    "PluginInfo",
    "Reissue",
    "hookimpl",
    "hookspec",
    "list_plugins",
]
