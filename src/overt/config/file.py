"""``overt.toml``: one file naming the ledger, models, routes, prices, budgets and plugins.

Entry points only (the library never reads files or the environment on its
own). Which file: ``--config PATH``, else ``OVERT_CONFIG``, else ``./overt.toml``
if there is one. Precedence: command-line flags > ``OVERT_*`` variables > the
file > defaults. Relative paths in the file (``db``, ``transcript``,
``cache_dir``, ``plugins.files``) are relative to the file's folder.

Every problem is reported, each with the file's line and the dotted field::

    overt.toml:12: routes.cheap.escalate_to: unknown model 'strongg' (known: ...)
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from overt.channels.settings import EmailSettings, SlackSettings
from overt.config.lines import key_lines, line_of
from overt.config.schema import (
    BudgetFile,
    ConfigFile,
    Loc,
    PolicyFile,
    ProviderFile,
    RouteFile,
    allowed_keys,
    reference_problems,
)
from overt.config.values import Config, Route
from overt.engine.budget import Budget
from overt.errors import ConfigError, UsageError
from overt.ledger.checkpoints import CheckpointSettings
from overt.memory.kinds import MemoryKinds
from overt.models.options import ModelAlias
from overt.models.router import EscalationRule
from overt.policy.gate import PolicySettings
from overt.policy.rules import rule_from_mapping
from overt.tools.mcp_toolset import specs_from_config
from overt.witness.client import Cosigner
from overt.witness.notes import WitnessKey

DEFAULT_NAME = "overt.toml"
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_SYNTAX_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a config file: where (line, dotted field) and what."""

    path: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.field}: {self.message}" if self.field else \
            f"{where}: {self.message}"


class ConfigFileError(ConfigError):
    """A config file does not parse or validate; ``problems`` holds every problem found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def find(path: str | Path | None = None, env: Mapping[str, str] | None = None,
         cwd: str | Path | None = None) -> Path | None:
    """The config file to read: ``path``, else ``OVERT_CONFIG``, else ``./overt.toml`` if
    present, else None.

    Raises:
        ConfigError: a file named by ``path`` or ``OVERT_CONFIG`` does not exist.
    """
    env = os.environ if env is None else env
    named = path or env.get("OVERT_CONFIG")
    if named:
        found = Path(named)
        if not found.is_file():
            source = "--config" if path else "OVERT_CONFIG"
            raise ConfigError(f"config file {found} (from {source}) does not exist")
        return found
    default = Path(cwd or ".") / DEFAULT_NAME
    return default if default.is_file() else None


def parse(text: str, path: str = DEFAULT_NAME, *, schemes: Iterable[str] = (),
          models: Iterable[str] = (), route_given: bool = False) -> ConfigFile:
    """Parse and validate the text of a config file.

    ``schemes`` and ``models``: model schemes and names plugins register, known
    beside overt's own. ``route_given``: a flag or variable names the route (the
    file need not name one of its routes; the effective config is checked instead).

    Raises:
        ConfigFileError: with every problem, each naming its line and field.
    """
    if text.startswith("\ufeff"):  # tomllib says only "Invalid statement" at line 1
        raise ConfigFileError([Problem(path, 1, "", "not valid TOML: the file starts with a "
                                       "byte-order mark (BOM); save it as UTF-8 without one")])
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _SYNTAX_AT.search(message)
        line = int(match.group(1)) if match else None
        raise ConfigFileError([Problem(path, line, "", f"not valid TOML: "
                                       f"{_SYNTAX_AT.sub('', message)}")]) from None
    lines = key_lines(text)
    problems = [Problem(path, _line(lines, loc), _dotted(loc), message)
                for loc, message in reference_problems(data, schemes=schemes, models=models,
                                                       route_given=route_given)]
    cfg = None
    try:
        cfg = ConfigFile.model_validate(data)
    except ValidationError as exc:
        problems += [_problem(path, lines, tuple(e["loc"]), e["type"], e["msg"], e["input"])
                     for e in exc.errors()]
    if problems or cfg is None:
        raise ConfigFileError(_sorted(problems))
    return cfg


def read(path: str | Path, *, route_given: bool = False,
         **known: Iterable[str]) -> ConfigFile:
    """:func:`parse` the file at ``path``.

    Raises:
        ConfigFileError: it cannot be read, parsed or validated.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError([Problem(str(path), None, "", f"cannot read: {exc}")]) from None
    return parse(text, str(path), route_given=route_given, **known)


def load(env: Mapping[str, str] | None = None, *, path: str | Path | None = None,
         cwd: str | Path | None = None, **overrides: Any) -> Config:
    """The effective config of an entry point: the file (see :func:`find`), then the
    environment over it, then ``overrides`` (command-line flags) over both.

    Raises:
        ConfigError: the file is missing, invalid (:class:`ConfigFileError`), or a
            variable or flag holds a malformed value.
    """
    env = os.environ if env is None else env
    found = find(path, env, cwd)
    if found is None:
        return Config.from_env(env, **overrides)
    cfg = read(found, route_given=bool(overrides.get("route") or env.get("OVERT_ROUTE")))
    return Config.from_env(env, file=values(cfg, found.parent, env), config_file=str(found),
                           **overrides)


def values(cfg: ConfigFile, base: Path | None = None,
           env: Mapping[str, str] | None = None) -> dict[str, object]:
    """The file's settings as :class:`Config` field values (only what it sets); relative
    paths resolved against ``base``; ``env`` (default ``os.environ``) holds the
    variables the file names (an MCP server's ``bearer_token_env``)."""
    out: dict[str, object] = {}
    for key in ("db", "model", "route", "system_prompt"):
        value = getattr(cfg, key)
        if value is not None:
            out[key] = _path(value, base) if key == "db" else value
    for key in ("transcript", "cache_dir"):
        value = getattr(cfg, key)
        if value is not None:
            out[key] = _path(value, base) if value else value
    out.update(cfg.limits.model_dump(exclude_none=True))
    plugins = cfg.plugins
    if plugins.enabled:
        out["plugins_enabled"] = tuple(plugins.enabled)
    if plugins.disabled:
        out["plugins_disabled"] = tuple(plugins.disabled)
    if plugins.files:
        out["plugin_files"] = tuple(_path(f, base) for f in plugins.files)
    if cfg.providers:
        out["providers"] = {scheme: _settings(p) for scheme, p in cfg.providers.items()}
    if cfg.models:
        out["model_aliases"] = {name: ModelAlias(m.spec, _settings(m))
                                for name, m in cfg.models.items()}
    if cfg.prices:
        out["prices"] = {name: (p.input, p.output) for name, p in cfg.prices.items()}
    out["budget"] = _budget(cfg.budget)
    if cfg.memory.kinds or cfg.memory.links:
        out["memory"] = MemoryKinds.builtin().extended(cfg.memory.kinds, cfg.memory.links)
    out["policy"] = _policy(cfg.policy)
    if cfg.mcp_servers:
        out["mcp_servers"] = tuple(specs_from_config(
            {name: m.model_dump() for name, m in cfg.mcp_servers.items()},
            os.environ if env is None else env))
    if cfg.capabilities:
        out["capabilities"] = {actor: tuple(c) for actor, c in cfg.capabilities.items()}
    if cfg.operator is not None:
        out["operator"] = cfg.operator
    if cfg.agent is not None:
        out["agent"] = cfg.agent
    if cfg.routes:
        out["routes"] = {name: _route(r) for name, r in cfg.routes.items()}
    if cfg.slack is not None:
        out["slack"] = SlackSettings(**{**cfg.slack.model_dump(),
                                        "allowed_users": tuple(cfg.slack.allowed_users),
                                        "actors": tuple(cfg.slack.actors.items())})
    if cfg.email is not None:
        out["email"] = EmailSettings(**{
            **cfg.email.model_dump(), "allowed_senders": tuple(cfg.email.allowed_senders),
            "actors": tuple((k.lower(), v) for k, v in cfg.email.actors.items())})
    if cfg.checkpoints is not None:
        c = cfg.checkpoints
        out["checkpoints"] = CheckpointSettings(
            private_key=_path(c.private_key, base), witness_dir=_path(c.witness_dir, base),
            commands=tuple(tuple(command) for command in c.commands if command),
            urls=tuple(c.urls), every_entries=c.every_entries, every_seconds=c.every_seconds,
            cosigners=tuple(Cosigner(w.url, _vkey(w.vkey)) for w in c.witnesses))
    return out


def _vkey(text: str) -> WitnessKey:
    try:
        return WitnessKey.parse(text)
    except UsageError as exc:
        raise ConfigError(f"[checkpoints] witnesses: {exc}") from exc


def _settings(provider: ProviderFile) -> dict[str, Any]:
    return provider.model_dump(exclude_none=True, exclude={"spec"})


def _policy(policy: PolicyFile) -> PolicySettings:
    rules = tuple(rule_from_mapping(r.model_dump()) for r in policy.rules)
    if policy.approval_ttl_s is None:
        return PolicySettings(rules, policy.defaults)
    return PolicySettings(rules, policy.defaults, policy.approval_ttl_s)


def _budget(budget: BudgetFile) -> Budget:
    return Budget(**budget.model_dump())


def _route(route: RouteFile) -> Route:
    e = route.escalation
    rule = EscalationRule(hedges=(*e.hedges, *e.extra_hedges),
                          confidence_below=e.confidence_below, on_empty=e.on_empty,
                          on_malformed_tool_call=e.on_malformed_tool_call,
                          tool_error_streak=e.tool_error_streak)
    return Route(model=route.model, escalate_to=route.escalate_to,
                 fallback=tuple(route.fallback),
                 tools=tuple(route.tools) if route.tools is not None else None,
                 budget=_budget(route.budget) if route.budget is not None else None,
                 escalation=rule)


def _path(value: str, base: Path | None) -> str:
    if base is None or value == ":memory:" or "://" in value or value.startswith("file:") \
            or Path(value).is_absolute():  # a SQLite URI as given: the config refuses it
        return value
    return str(base / value)


def _problem(path: str, lines: dict[Loc, int], loc: Loc, kind: str, message: str,
             given: Any) -> Problem:
    if kind == "extra_forbidden":
        allowed = allowed_keys(loc[:-1])
        message = "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    elif kind == "missing":
        message = "is required"
    elif kind.endswith("_type"):
        message = f"{message}, got {type(given).__name__} {given!r}"[:200]
    message = message.removeprefix("Value error, ")
    return Problem(path, _line(lines, loc), _dotted(loc), message)


def _line(lines: dict[Loc, int], loc: Loc) -> int | None:
    return line_of(lines, loc)


def _dotted(loc: Loc) -> str:
    """``("routes", "cheap", "fallback", 1)`` as ``routes.cheap.fallback[1]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if _BARE.match(part) else '"' + part.replace('"', '\\"') + '"'
            out += f".{text}" if out else text
    return out


def _sorted(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0, p.field))
