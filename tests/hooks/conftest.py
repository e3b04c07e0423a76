"""A runtime with given plugins registered, on both ledger backends."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from overt.channels.transcript import Transcript
from overt.engine.values import EngineSettings
from overt.hooks import PluginHost
from overt.ledger.base import Ledger
from overt.models.base import Model
from overt.runtime import Runtime
from overt.tools.base import Tool
from tests.conftest import ALLOW_ALL, run

PluggedFactory = Callable[..., Runtime]


@pytest.fixture
def plugged(ledger: Ledger, tmp_path: Path) -> PluggedFactory:
    """``plugged(model, plugin, ..., tools=[...], timeouts={...}, **settings)``.

    Plugins are registered in the order given, so the first is asked first;
    a plugin is an object (or a ``(name, object)`` pair) with ``@hookimpl`` methods.
    """
    def make(model: Model, *plugins: Any, tools: Iterable[Tool] = (),
             timeouts: dict[str, float | None] | None = None, **settings: Any) -> Runtime:
        host = PluginHost(timeouts=timeouts)
        for plugin in reversed(plugins):
            name, obj = plugin if isinstance(plugin, tuple) else (type(plugin).__name__, plugin)
            host.register(obj, name)
        return Runtime(model=model, ledger=ledger, tools=tools, plugins=host,
                       settings=EngineSettings(**settings),
                       transcript=Transcript(tmp_path / "transcript.jsonl"), gate=ALLOW_ALL)
    return make


def records(ledger: Any, *kinds: str) -> list[dict[str, Any]]:
    """The data of the entries of ``kinds``, in order."""
    return [e.data for e in run(ledger.entries(kinds=list(kinds)))]


def kinds(ledger: Any) -> list[str]:
    return [e.kind for e in run(ledger.entries())]
