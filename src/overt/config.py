"""Configuration as a value. Only entry points read the environment (``from_env``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from overt.errors import ConfigError


def default_data_dir() -> Path:
    """Where overt keeps its ledger and transcript by default (the user data dir)."""
    return Path(platformdirs.user_data_dir("overt", appauthor=False))


def default_cache_dir() -> Path:
    """Where overt keeps downloaded model weights by default (the user cache dir)."""
    return Path(platformdirs.user_cache_dir("overt", appauthor=False))


@dataclass(frozen=True, slots=True)
class Budget:
    """Spending limits, each optional: tokens (input + output) and US dollars,
    per session and per UTC day. Checked before every model call."""

    session_tokens: int | None = None
    day_tokens: int | None = None
    session_usd: float | None = None
    day_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("session_tokens", "day_tokens", "session_usd", "day_usd"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 0):
                raise ConfigError(f"budget {name} must be a non-negative number, got {value!r}")

    @property
    def empty(self) -> bool:
        return all(getattr(self, n) is None for n in
                   ("session_tokens", "day_tokens", "session_usd", "day_usd"))


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
    providers read them from :class:`overt.models.resolve.ModelOptions`, never
    from the environment.
    """

    db: str
    model: str = "local"
    route: str = "default"
    max_tool_calls: int = 5
    max_consecutive_tool_errors: int = 3
    tool_timeout_s: float = 30.0
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

    def __post_init__(self) -> None:
        for name in ("plugins_enabled", "plugins_disabled", "plugin_files"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{name} must be a list of strings, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        if self.pre_tool_call_timeout_s <= 0:
            raise ConfigError("pre_tool_call_timeout_s must be positive")
        if self.max_tool_calls < 1:
            raise ConfigError(f"max_tool_calls must be at least 1, got {self.max_tool_calls}")
        if self.max_consecutive_tool_errors < 1:
            raise ConfigError("max_consecutive_tool_errors must be at least 1")
        if self.tool_timeout_s <= 0:
            raise ConfigError(f"tool_timeout_s must be positive, got {self.tool_timeout_s}")
        if not self.db:
            raise ConfigError("db must name a ledger")

    @property
    def transcript_path(self) -> Path | None:
        if self.transcript == "":
            return None
        if self.transcript is not None:
            return Path(self.transcript)
        if self.db == ":memory:":
            return None
        return Path(self.db).with_name("transcript.jsonl")

    def with_(self, **changes: object) -> Config:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Config:
        """Build from ``OVERT_*`` variables (entry points only); ``overrides`` win when not None.

        ``OVERT_DB``, ``OVERT_MODEL``, ``OVERT_TRANSCRIPT``, ``OVERT_SYSTEM_PROMPT``,
        ``OVERT_MAX_TOOL_CALLS``, ``OVERT_TOOL_TIMEOUT_S``, ``OVERT_CACHE_DIR``,
        ``OVERT_PRE_TOOL_CALL_TIMEOUT_S``; comma lists ``OVERT_PLUGINS_ENABLED``,
        ``OVERT_PLUGINS_DISABLED``, ``OVERT_PLUGIN_FILES``.

        Raises:
            ConfigError: a variable holds a malformed value.
        """
        env = os.environ if env is None else env
        values: dict[str, object] = {
            "db": env.get("OVERT_DB") or str(default_data_dir() / "ledger.db"),
            "model": env.get("OVERT_MODEL") or "local",
            "transcript": env.get("OVERT_TRANSCRIPT"),
            "system_prompt": env.get("OVERT_SYSTEM_PROMPT"),
            "cache_dir": env.get("OVERT_CACHE_DIR"),
        }
        for key, name in (("plugins_enabled", "OVERT_PLUGINS_ENABLED"),
                          ("plugins_disabled", "OVERT_PLUGINS_DISABLED"),
                          ("plugin_files", "OVERT_PLUGIN_FILES")):
            values[key] = comma_list(env.get(name, ""))
        for key, name, kind in (("max_tool_calls", "OVERT_MAX_TOOL_CALLS", int),
                                ("tool_timeout_s", "OVERT_TOOL_TIMEOUT_S", float),
                                ("pre_tool_call_timeout_s", "OVERT_PRE_TOOL_CALL_TIMEOUT_S",
                                 float)):
            raw = env.get(name)
            if raw:
                try:
                    values[key] = kind(raw)
                except ValueError:
                    raise ConfigError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
        providers: dict[str, dict[str, Any]] = {}
        for scheme, key, name in _PROVIDER_ENV:
            if env.get(name):
                providers.setdefault(scheme, {})[key] = env[name]
        values["providers"] = providers
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def comma_list(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` as ``("a", "b", "c")``."""
    return tuple(part.strip() for part in text.split(",") if part.strip())
