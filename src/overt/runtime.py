"""The composition root: wires a model, tools, plugins, the ledger and a transcript.

Only this module (and the entry points) choose concrete pieces; the engine
speaks to protocols.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Collection, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from overt import __version__, routing
from overt.channels.transcript import Transcript, transcript_line
from overt.clock import now_iso
from overt.config import Budget, Config
from overt.engine.budget import BudgetGuard
from overt.engine.loop import Engine, EngineSettings
from overt.errors import UsageError
from overt.events import Event, RuntimeStarted
from overt.hooks.manager import PluginHost
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.models.base import Model
from overt.models.pricing import PriceTable
from overt.models.resolve import ModelCatalog, ModelOptions, Progress
from overt.prompts import load_template, render
from overt.tools.base import Tool
from overt.tools.registry import ToolRegistry
from overt.types import IncomingMessage, Message, ResponseResult, ToolSpec

log = logging.getLogger("overt.runtime")
T = TypeVar("T")


class Runtime:
    """An agent runtime: answers messages with a model and tools, on the record."""

    def __init__(self, *, model: Model, ledger: Ledger, tools: Iterable[Tool] | None = None,
                 settings: EngineSettings | None = None, transcript: Transcript | None = None,
                 system_prompt_template: str | None = None,
                 plugins: PluginHost | None = None, models: ModelCatalog | None = None,
                 prices: PriceTable | None = None, budget: Budget | None = None,
                 allowed_tools: Collection[str] | None = None) -> None:
        """``tools``: the tools to offer besides the plugins' (``None``: overt's built-in
        tools, through its built-in plugin). ``plugins``: the registered plugins
        (``None``: the built-in plugin alone when ``tools`` is None, else none).
        ``models``: where a ``Reissue`` finds the model it names (``None``: the
        plugins' models and providers). The plugins' tools and hooks are taken
        here, once: a plugin registered on the host later is not seen.
        ``allowed_tools``: offer only these (a route's ``tools``; None: all).

        Raises:
            UsageError: two tools share a name, or ``allowed_tools`` names a tool
                that is not registered.
        """
        self.model = model
        self.ledger = ledger
        self.plugins = plugins if plugins is not None else (
            PluginHost.builtin_only() if tools is None else PluginHost())
        self.tools = ToolRegistry(tools or ())
        self.plugins.add_tools(self.tools)
        if allowed_tools is not None:
            self.tools = _only(self.tools, allowed_tools)
        self.models = models if models is not None else ModelCatalog(self.plugins.models())
        self.settings = settings or EngineSettings()
        self.transcript = transcript
        self.started_at = now_iso()
        template = system_prompt_template if system_prompt_template is not None \
            else load_template(None)
        max_calls = self.settings.max_tool_calls

        def system_prompt_for(specs: tuple[ToolSpec, ...]) -> str:
            return render(template, specs, max_calls)

        self.prices = prices or PriceTable()
        self.engine = Engine(
            model, self.tools, ledger, system_prompt=system_prompt_for(self.tools.specs()),
            settings=self.settings, runtime_started_at=self.started_at,
            hooks=self.plugins.hooks, models=self._model, system_prompt_for=system_prompt_for,
            prices=self.prices,
            budget=None if budget is None or budget.empty else BudgetGuard(budget, ledger,
                                                                           self.prices))
        self._started = False

    def _model(self, spec: str) -> Model:
        return self.model if spec == self.model.name else self.models.get(spec)

    @classmethod
    def from_config(cls, config: Config, *, model: Model | None = None,
                    tools: Iterable[Tool] | None = None,
                    progress: Progress | None = None) -> Runtime:
        """Compose a runtime from ``config``: its plugins, then its model, ledger and tools.

        Raises:
            UsageError, LedgerError, ModelError: a piece cannot be built.
            PluginError: an enabled plugin is not installed or cannot be loaded.
        """
        plugins = PluginHost.load(
            config.plugins_enabled, config.plugins_disabled, config.plugin_files,
            timeouts={"pre_tool_call": config.pre_tool_call_timeout_s})
        catalog = ModelCatalog(plugins.models(), options=ModelOptions(
            cache_dir=config.cache_dir, progress=progress, provider_settings=config.providers))
        routing.add_aliases(config, catalog)
        chosen = model or routing.route_model(config, catalog)
        routing.add_router(config, plugins, chosen)
        route = config.active_route
        ledger = open_ledger(config.db)
        path = config.transcript_path
        return cls(
            model=chosen, ledger=ledger, tools=tools if tools is not None else (),
            settings=EngineSettings(
                max_tool_calls=config.max_tool_calls,
                max_consecutive_tool_errors=config.max_consecutive_tool_errors,
                tool_timeout_s=config.tool_timeout_s, route=config.route),
            transcript=Transcript(path) if path else None,
            system_prompt_template=load_template(config.system_prompt), plugins=plugins,
            models=catalog, prices=PriceTable(config.prices), budget=config.effective_budget,
            allowed_tools=route.tools if route is not None else None)

    async def start(self) -> None:
        """Record that this runtime started (once), with any plugin that failed to register."""
        if self._started:
            return
        self._started = True
        events: list[Event] = [RuntimeStarted(
            overt_version=__version__, pid=os.getpid(), host=socket.gethostname(),
            model=self.model.name)]
        events.extend(self.plugins.problems)
        await self.ledger.record(events, self.plugins.problem_contents)

    async def respond(self, message: IncomingMessage, *, session_id: str | None = None,
                      history: Sequence[Message] = ()) -> ResponseResult:
        """Answer ``message``; the turn is recorded and the reply goes to the transcript."""
        await self.start()
        outcome = await self.engine.run_turn(message, session_id=session_id, history=history)
        result = outcome.result
        if self.transcript is not None:
            try:
                self.transcript.append(transcript_line(
                    result, source=message.source,
                    caller_session_id=message.caller_session_id, model=self.model.name))
            except OSError as exc:  # the ledger has the turn; a lost transcript line is logged
                log.error("transcript line for turn %s not written: %s", result.turn_id, exc)
        return result

    async def close(self) -> None:
        await self.ledger.close()
        if self.transcript is not None:
            self.transcript.close()
        for model in {id(m): m for m in (self.model, *self.models.built())}.values():
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()
            elif (close := getattr(model, "close", None)) is not None:
                close()


def _only(registry: ToolRegistry, names: Collection[str]) -> ToolRegistry:
    """``registry`` with only the tools ``names`` lists.

    Raises:
        UsageError: a name is not registered.
    """
    unknown = sorted(set(names) - set(registry.names))
    if unknown:
        raise UsageError(f"the route's tools name {', '.join(unknown)}, which is not "
                         f"registered (tools: {', '.join(registry.names) or 'none'})")
    kept = ToolRegistry()
    for spec in registry.specs():
        if spec.name in names:
            tool = registry.get(spec.name)
            if tool is not None:
                kept.register(tool)
            else:
                kept.register_spec(spec)
    return kept


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from synchronous code (scripts, the CLI)."""
    return asyncio.run(coro)
