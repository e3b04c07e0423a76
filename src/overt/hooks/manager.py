"""Plugins: discovery, enablement, registration, and what they register.

Plugins come from the entry-point group ``overt.plugins`` (an installed
package) and from Python files named in ``plugin_files`` (named by their file
stem). None is imported, let alone run, unless ``plugins.enabled`` lists it;
``plugins.disabled`` always wins. overt's built-in plugin (``builtin``) is
always registered unless disabled. Call order: the order ``plugins.enabled``
lists, built-in last.

A name in ``plugins.enabled`` that is not installed, or a plugin that fails to
import or register, stops the runtime from starting (:class:`PluginError`): a
block rule that silently failed to load would leave calls unchecked. A plugin
whose ``register_tools`` or ``register_models`` fails only loses its tools or
models, recorded as ``hook.error`` when the runtime starts.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from overt.errors import PluginError, UsageError
from overt.events import HookError, HookErrorConsequence
from overt.hooks import specs
from overt.hooks.calls import HookSet, Impl
from overt.ledger.canonical import digest_text
from overt.ledger.chain import clean_text
from overt.models.base import Model
from overt.models.resolve import ModelProvider
from overt.tools import shapes
from overt.tools.base import Tool
from overt.tools.registry import ToolRegistry
from overt.types import ToolSpec

if TYPE_CHECKING:
    from overt.memory.kinds import MemoryKinds

ENTRY_POINT_GROUP = "overt.plugins"
BUILTIN = "builtin"


@dataclass(frozen=True, slots=True)
class Candidate:
    """An installed plugin, not yet imported."""

    name: str
    source: str
    load: Callable[[], object]


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One line of ``overt plugins``. ``status``: enabled, disabled or available."""

    name: str
    source: str
    status: str
    hooks: tuple[str, ...]
    error: str | None = None


def discover(plugin_files: Sequence[str] = ()) -> list[Candidate]:
    """Every plugin that could be enabled: built-in, entry points, then files."""
    found = [Candidate(BUILTIN, "built-in", _builtin_module)]
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = f" ({ep.dist.name} {ep.dist.version})" if ep.dist is not None else ""
        found.append(Candidate(ep.name, f"entry point {ep.value}{dist}", ep.load))
    for path in plugin_files:
        name = Path(path).stem
        found.append(Candidate(name, f"file {path}", _file_loader(path, name)))
    return found


def _builtin_module(memory: MemoryKinds | None = None) -> object:
    from overt.hooks.builtin import Builtin

    return Builtin(memory)


def _file_loader(path: str, name: str) -> Callable[[], ModuleType]:
    def load() -> ModuleType:
        module_name = f"overt_plugin_{name}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise PluginError(f"plugin file {path} is not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    return load


class PluginHost:
    """A pluggy ``PluginManager`` with overt's rules, and the snapshot the engine calls.

    ``problems`` holds the ``hook.error`` entries of start-up (a plugin whose
    tools or models could not be taken), with their message bodies in
    ``problem_contents``; the runtime records them when it starts.
    """

    def __init__(self, *, timeouts: Mapping[str, float | None] | None = None) -> None:
        self.pm = pluggy.PluginManager(specs.PROJECT)
        self.pm.add_hookspecs(specs)
        self.timeouts = dict(timeouts or {})
        self.sources: dict[str, str] = {}
        self.problems: list[HookError] = []
        self.problem_contents: dict[str, str] = {}
        self._hooks: HookSet | None = None
        self._models: list[Model | ModelProvider] | None = None

    @classmethod
    def builtin_only(cls, *, memory: MemoryKinds | None = None, **kwargs: Any) -> PluginHost:
        """A host with overt's built-in plugin alone (its memory tools over ``memory``'s
        kinds; default: the built-in kinds)."""
        host = cls(**kwargs)
        host.register(_builtin_module(memory), BUILTIN, "built-in")
        return host

    @classmethod
    def load(cls, enabled: Sequence[str] = (), disabled: Sequence[str] = (),
                    plugin_files: Sequence[str] = (), *,
                    timeouts: Mapping[str, float | None] | None = None,
                    memory: MemoryKinds | None = None) -> PluginHost:
        """Discover, then load and register exactly the plugins that are enabled.

        ``memory``: the node and link kinds of the built-in memory tools (default: the
        built-in kinds; ``Config.memory`` holds those ``[memory]`` adds).

        Raises:
            PluginError: an enabled plugin is not installed, or cannot be loaded
                or registered.
        """
        off = set(disabled)
        found = discover(plugin_files)
        candidates = {c.name: c for c in reversed(found)}
        wanted = [n for n in dict.fromkeys(enabled) if n not in off and n != BUILTIN]
        for name in (*wanted, BUILTIN):  # two of one name: one of them would never load
            sources = [c.source for c in found if c.name == name]
            if len(sources) > 1:
                raise PluginError(f"two plugins are named {name!r} ({'; '.join(sources)}): "
                                  "rename one")
        missing = [n for n in wanted if n not in candidates]
        if missing:
            known = ", ".join(sorted(candidates)) or "none"
            raise PluginError(f"plugins.enabled names {', '.join(missing)}, which is not "
                              f"installed (installed: {known})")
        host = cls(timeouts=timeouts)
        if BUILTIN not in off:
            host.register(_builtin_module(memory), BUILTIN, "built-in")
        for name in reversed(wanted):  # pluggy calls the last registered first
            candidate = candidates[name]
            try:
                plugin = candidate.load()
            except PluginError:
                raise
            except Exception as exc:  # any import failure stops the start, named
                raise PluginError(f"plugin {name} ({candidate.source}) could not be loaded: "
                                  f"{type(exc).__name__}: {exc}") from exc
            host.register(plugin, name, candidate.source)
        return host

    def register(self, plugin: object, name: str, source: str = "") -> None:
        """Register ``plugin`` under ``name``.

        Raises:
            PluginError: the name is taken, a hook implementation does not match
                its spec, names no hook, or is a wrapper.
        """
        if name in self.sources:
            raise PluginError(f"a plugin named {name!r} is already registered")
        try:
            self.pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"plugin {name} cannot be registered: {exc}") from exc
        try:
            for caller in self.pm.get_hookcallers(plugin) or ():
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin and (impl.wrapper or impl.hookwrapper):
                        raise PluginError(f"plugin {name}: {caller.name} is a hook wrapper, "
                                          "which overt does not call")
            self.pm.check_pending()
        except (PluginError, pluggy.PluginValidationError) as exc:
            self.pm.unregister(plugin)
            raise PluginError(f"plugin {name} cannot be registered: {exc}") from exc
        self.sources[name] = source
        self._hooks = self._models = None

    def unregister(self, name: str) -> None:
        """Remove the plugin registered as ``name`` (no-op if none)."""
        if self.pm.unregister(name=name) is not None:
            del self.sources[name]
            self._hooks = self._models = None

    @property
    def names(self) -> list[str]:
        """Registered plugins, in registration order."""
        return list(self.sources)

    @property
    def hooks(self) -> HookSet:
        """The snapshot the engine calls; rebuilt after plugins change."""
        if self._hooks is None:
            impls = {name: tuple(Impl.of(i.plugin_name, i.function, tuple(i.argnames))
                                 for i in reversed(getattr(self.pm.hook, name).get_hookimpls()))
                     for name in specs.HOOK_NAMES}
            self._hooks = HookSet(impls, self.timeouts)
        return self._hooks

    def hooks_of(self, name: str) -> tuple[str, ...]:
        """The hooks the plugin registered as ``name`` implements."""
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            return ()
        callers = self.pm.get_hookcallers(plugin) or []
        return tuple(h for h in specs.HOOK_NAMES if any(c.name == h for c in callers))

    def add_tools(self, registry: ToolRegistry) -> None:
        """Register every plugin's tools into ``registry``, built-in first.

        A plugin whose ``register_tools`` raises, answers with anything but
        tools, specs or descriptors, or names a tool already registered adds
        nothing; that goes to :attr:`problems`.
        """
        for impl in _builtin_first(self.hooks.register_tools):
            try:
                items = _tools_in(_answer(impl))
                names = [i.name for i in items]
                taken = [n for n in names if n in registry]
                if taken or len(set(names)) != len(names):
                    raise UsageError(f"tool names already registered: {taken or names}")
            except Exception as exc:  # noqa: BLE001  a plugin's failure costs it its tools, recorded
                self._problem(impl, exc, "no_tools")
                continue
            for item in items:
                if isinstance(item, Tool):
                    registry.register(item)
                else:
                    registry.register_spec(item)

    def models(self) -> list[Model | ModelProvider]:
        """Every plugin's models and providers, built-in first (failures to :attr:`problems`).

        Asked once; later calls give the same list.
        """
        if self._models is not None:
            return list(self._models)
        found: list[Model | ModelProvider] = []
        for impl in _builtin_first(self.hooks.register_models):
            try:
                answer = _answer(impl)
                items = [] if answer is None else list(_iterable(answer))
                for item in items:
                    if not isinstance(item, ModelProvider | Model):
                        raise UsageError(f"not a model or a model provider: "
                                         f"{type(item).__name__}")
            except Exception as exc:  # noqa: BLE001  a plugin's failure costs it its models
                self._problem(impl, exc, "no_models")
                continue
            found.extend(items)
        self._models = found
        return list(found)

    def _problem(self, impl: Impl, exc: Exception, consequence: HookErrorConsequence) -> None:
        body = clean_text(f"{type(exc).__name__}: {exc}")
        digest = digest_text(body)
        self.problem_contents[digest] = body
        hook = "register_tools" if consequence == "no_tools" else "register_models"
        self.problems.append(HookError(plugin=impl.plugin, hook=hook,
                                       error_type=type(exc).__name__, consequence=consequence,
                                       error_digest=digest))


def list_plugins(enabled: Sequence[str] = (), disabled: Sequence[str] = (),
                 plugin_files: Sequence[str] = ()) -> list[PluginInfo]:
    """Every installed plugin, whether it is enabled, and which hooks it implements.

    Imports each plugin to read its hooks (registering it on a scratch host;
    no hook is called). A plugin that cannot be imported is listed with its error.
    """
    on, off = set(enabled), set(disabled)
    infos = []
    for c in discover(plugin_files):
        status = "disabled" if c.name in off else (
            "enabled" if c.name in on or c.name == BUILTIN else "available")
        try:
            scratch = PluginHost()
            scratch.register(c.load(), c.name, c.source)
            infos.append(PluginInfo(c.name, c.source, status, scratch.hooks_of(c.name)))
        except Exception as exc:  # noqa: BLE001  a broken plugin is listed with its error
            infos.append(PluginInfo(c.name, c.source, status, (),
                                    f"{type(exc).__name__}: {exc}"))
    return infos


def _builtin_first(impls: tuple[Impl, ...]) -> list[Impl]:
    return sorted(impls, key=lambda i: i.plugin != BUILTIN)  # stable: call order otherwise


def _answer(impl: Impl) -> Any:
    answer = impl.function(*[None for _ in impl.argnames])
    if inspect.iscoroutine(answer):
        answer.close()
        raise UsageError(f"{impl.plugin}: register_tools and register_models must be def, "
                         "not async def")
    return answer


def _iterable(answer: object) -> Iterable[Any]:
    if isinstance(answer, str | bytes | Mapping) or not isinstance(answer, Iterable):
        raise UsageError(f"expected a list, got {type(answer).__name__}")
    return answer


def _tools_in(answer: object) -> list[Tool | ToolSpec]:
    items: list[Tool | ToolSpec] = []
    for item in [] if answer is None else _iterable(answer):
        if isinstance(item, Tool):
            items.append(item)
        elif isinstance(item, ToolSpec | Mapping):
            items.append(shapes.to_spec(item))
        else:
            raise UsageError(f"not a tool, spec or descriptor: {type(item).__name__}")
    return items
