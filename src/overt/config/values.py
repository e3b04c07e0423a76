"""Configuration as a value. Only entry points read the environment (``from_env``)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from overt.channels.settings import EmailSettings, SlackSettings
from overt.engine.budget import Budget
from overt.errors import ConfigError
from overt.ledger import refuse_sqlite_uri
from overt.ledger.checkpoints import CheckpointSettings
from overt.memory.kinds import MemoryKinds
from overt.models.options import ModelAlias
from overt.models.router import EscalationRule
from overt.policy.gate import PolicySettings
from overt.tools.mcp_toolset import McpServerSpec


def default_data_dir() -> Path:
    """Where overt keeps its ledger and transcript by default (the user data dir)."""
    return Path(platformdirs.user_data_dir("overt", appauthor=False))


def default_cache_dir() -> Path:
    """Where overt keeps downloaded model weights by default (the user cache dir)."""
    return Path(platformdirs.user_cache_dir("overt", appauthor=False))


@dataclass(frozen=True, slots=True)
class Route:
    """A route (``[routes.NAME]``): its model (None: the config's ``model``), a stronger
    model to escalate weak answers to, models to fall back to on provider errors, the
    tools it offers (None: all), and a budget that replaces the config's for it."""

    model: str | None = None
    escalate_to: str | None = None
    fallback: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    budget: Budget | None = None
    escalation: EscalationRule = field(default_factory=EscalationRule)


# The providers' conventional variables, read by entry points only.
_PROVIDER_ENV = (
    ("anthropic", "api_key", "ANTHROPIC_API_KEY"),
    ("anthropic", "base_url", "ANTHROPIC_BASE_URL"),
    ("openai", "api_key", "OPENAI_API_KEY"),
    ("openai", "base_url", "OPENAI_BASE_URL"),
)


@dataclass(frozen=True, slots=True)
class Config:
    """Everything a runtime needs to be composed.

    ``db`` is a SQLite file path (or ``:memory:``). ``model`` is a model spec:
    ``local``, ``scripted:PATH``. ``transcript`` is the outbound JSONL file
    (``None``: beside the ledger; ``""``: no transcript).

    Plugins: none runs unless ``plugins_enabled`` names it; ``plugins_disabled``
    always wins (``builtin`` there removes overt's own tools). ``plugin_files``
    are Python files to offer as plugins, each named by its file stem.
    ``pre_tool_call_timeout_s`` bounds each plugin's ``pre_tool_call``.

    ``providers`` holds each model provider's settings by scheme
    (``{"anthropic": {"api_key": ..., "base_url": ...}, "openai": {...}}``);
    providers read them from :class:`overt.models.options.ModelOptions`, never
    from the environment.
    """

    db: str
    model: str = "local"
    route: str = "default"
    max_tool_calls: int = 5  # per model response
    max_tool_calls_per_turn: int = 25
    max_consecutive_tool_errors: int = 3
    tool_timeout_s: float = 30.0
    max_tool_result_chars: int = 50_000  # what the model reads of one result
    transcript: str | None = None
    system_prompt: str | None = None
    cache_dir: str | None = None
    plugins_enabled: tuple[str, ...] = ()
    plugins_disabled: tuple[str, ...] = ()
    plugin_files: tuple[str, ...] = ()
    pre_tool_call_timeout_s: float = 5.0
    providers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # USD per million (input, output) tokens by model name; overrides the shipped table.
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    routes: Mapping[str, Route] = field(default_factory=dict)
    model_aliases: Mapping[str, ModelAlias] = field(default_factory=dict)
    policy: PolicySettings = field(default_factory=PolicySettings)
    # Actor pattern -> capability patterns, over the defaults (overt.policy.capabilities).
    capabilities: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    operator: str = "default"  # the name approvals decided from this machine are recorded by
    agent: str = "default"  # the agent acts as agent:NAME on every route
    mcp_servers: tuple[McpServerSpec, ...] = ()  # [mcp_servers.NAME]: their tools join ours
    slack: SlackSettings | None = None  # [slack]: the Slack DM channel, when configured
    email: EmailSettings | None = None  # [email]: the email channel, when configured
    # [checkpoints]: signed checkpoints of the ledger (key, witnesses, how often serve signs)
    checkpoints: CheckpointSettings | None = None
    # Node kinds and link rules of the memory graph ([memory] adds to the built-in ones).
    memory: MemoryKinds = field(default_factory=MemoryKinds.builtin)
    config_file: str | None = None  # the overt.toml this came from, if any
    read_only: bool = False  # open the ledger writing nothing (--read-only): writes refused
    create_ledger: bool = True  # False: open only a ledger that is there (commands that read)

    def __post_init__(self) -> None:
        for name in ("plugins_enabled", "plugins_disabled", "plugin_files"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{name} must be a list of strings, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        for name in ("tool_timeout_s", "pre_tool_call_timeout_s"):
            if math.isnan(getattr(self, name)):  # NaN <= 0 is false: it passed as a timeout
                raise ConfigError(f"{name} must be a number of seconds, got nan")
        if self.pre_tool_call_timeout_s <= 0:
            raise ConfigError("pre_tool_call_timeout_s must be positive")
        if not self.agent or any(c.isspace() or c == ":" for c in self.agent):
            raise ConfigError(f"agent must be a name without spaces or ':', got {self.agent!r}")
        if self.max_tool_calls < 1:
            raise ConfigError(f"max_tool_calls must be at least 1, got {self.max_tool_calls}")
        if self.max_tool_calls_per_turn < 1:
            raise ConfigError("max_tool_calls_per_turn must be at least 1, got "
                              f"{self.max_tool_calls_per_turn}")
        if self.max_consecutive_tool_errors < 1:
            raise ConfigError("max_consecutive_tool_errors must be at least 1")
        if self.tool_timeout_s <= 0:
            raise ConfigError(f"tool_timeout_s must be positive, got {self.tool_timeout_s}")
        if self.max_tool_result_chars < 100:
            raise ConfigError("max_tool_result_chars must be at least 100, got "
                              f"{self.max_tool_result_chars}")
        if not self.db:
            raise ConfigError("db must name a ledger")
        refuse_sqlite_uri(self.db)  # before anything is made on disk from it
        if self.routes and self.route not in self.routes:
            raise ConfigError(f"route {self.route!r} is not defined (routes: "
                              f"{', '.join(self.routes)})")

    @property
    def active_route(self) -> Route | None:
        """The settings of ``route``, if the config defines it."""
        return self.routes.get(self.route)

    @property
    def effective_budget(self) -> Budget:
        """The budget of this route: its own if it has one, else ``budget``."""
        route = self.routes.get(self.route)
        return route.budget if route is not None and route.budget is not None else self.budget

    @property
    def transcript_path(self) -> Path | None:
        if self.transcript == "":
            return None
        if self.transcript is not None:
            return Path(self.transcript)
        if self.db == ":memory:":
            return None
        if "://" in self.db:  # a server's ledger: no folder of its own here
            return default_data_dir() / "transcript.jsonl"
        return Path(self.db).with_name("transcript.jsonl")

    def with_(self, **changes: object) -> Config:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *,
                 file: Mapping[str, object] | None = None, **overrides: object) -> Config:
        """Build from ``OVERT_*`` variables (entry points only) over ``file``'s values
        (a config file's, see :mod:`overt.config.file`); ``overrides`` win when not None.

        ``OVERT_DB``, ``OVERT_MODEL``, ``OVERT_ROUTE``, ``OVERT_OPERATOR``, ``OVERT_TRANSCRIPT``,
        ``OVERT_SYSTEM_PROMPT``, ``OVERT_MAX_TOOL_CALLS``, ``OVERT_TOOL_TIMEOUT_S``,
        ``OVERT_CACHE_DIR``, ``OVERT_PRE_TOOL_CALL_TIMEOUT_S``; comma lists
        ``OVERT_PLUGINS_ENABLED``, ``OVERT_PLUGINS_DISABLED``, ``OVERT_PLUGIN_FILES``.
        A route's ``model`` is used unless the model is given by variable or override.
        Each ``api_key_env`` a provider or model alias names is read here.

        Raises:
            ConfigError: a variable holds a malformed value.
        """
        env = os.environ if env is None else env
        values: dict[str, object] = {"db": str(default_data_dir() / "ledger.db"),
                                     "model": "local"}
        values.update(file or {})
        for key, name in (("db", "OVERT_DB"), ("model", "OVERT_MODEL"),
                          ("route", "OVERT_ROUTE"), ("operator", "OVERT_OPERATOR"),
                          ("agent", "OVERT_AGENT")):
            if env.get(name):
                values[key] = env[name]
        for key, name in (("transcript", "OVERT_TRANSCRIPT"),
                          ("system_prompt", "OVERT_SYSTEM_PROMPT"),
                          ("cache_dir", "OVERT_CACHE_DIR")):
            if name in env:
                values[key] = env[name]
        for key, name in (("plugins_enabled", "OVERT_PLUGINS_ENABLED"),
                          ("plugins_disabled", "OVERT_PLUGINS_DISABLED"),
                          ("plugin_files", "OVERT_PLUGIN_FILES")):
            if env.get(name):
                values[key] = comma_list(env[name])
        for key, name, kind in (("max_tool_calls", "OVERT_MAX_TOOL_CALLS", int),
                                ("max_tool_calls_per_turn", "OVERT_MAX_TOOL_CALLS_PER_TURN", int),
                                ("tool_timeout_s", "OVERT_TOOL_TIMEOUT_S", float),
                                ("max_tool_result_chars", "OVERT_MAX_TOOL_RESULT_CHARS", int),
                                ("pre_tool_call_timeout_s", "OVERT_PRE_TOOL_CALL_TIMEOUT_S",
                                 float)):
            raw = env.get(name)
            if raw:
                try:
                    values[key] = kind(raw)
                except ValueError:
                    raise ConfigError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
        values["providers"] = _providers(env, values.get("providers"))
        aliases = values.get("model_aliases")
        if isinstance(aliases, Mapping):
            values["model_aliases"] = {
                name: replace(a, settings=_with_key(env, a.settings))
                for name, a in aliases.items()}
        values.update({k: v for k, v in overrides.items() if v is not None})
        routes = values.get("routes")
        route = routes.get(values.get("route", "default")) if isinstance(routes, Mapping) \
            else None
        if route is not None and route.model is not None and not env.get("OVERT_MODEL") \
                and overrides.get("model") is None:
            values["model"] = route.model
        return cls(**values)  # type: ignore[arg-type]


def _with_key(env: Mapping[str, str], settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with ``api_key_env`` replaced by the key it names (when set)."""
    resolved = {k: v for k, v in settings.items() if k != "api_key_env"}
    name = settings.get("api_key_env")
    if isinstance(name, str) and env.get(name):
        resolved["api_key"] = env[name]
    return resolved


def _providers(env: Mapping[str, str], given: object) -> dict[str, dict[str, Any]]:
    """The file's provider settings, keys read from the variables they name; the
    conventional variables over them (a key only where the file names no variable that
    is set)."""
    providers: dict[str, dict[str, Any]] = {}
    if isinstance(given, Mapping):
        providers = {scheme: _with_key(env, s) for scheme, s in given.items()}
    for scheme, key, name in _PROVIDER_ENV:
        if env.get(name):
            settings = providers.setdefault(scheme, {})
            if key != "api_key" or "api_key" not in settings:
                settings[key] = env[name]
    return providers


def comma_list(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` as ``("a", "b", "c")``."""
    return tuple(part.strip() for part in text.split(",") if part.strip())
