"""``overt config check`` and ``overt config show``: the config file, validated and in effect."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from overt.config import Config
from overt.config import file as config_file
from overt.config.lines import key_lines, line_of
from overt.errors import ConfigError, PluginError
from overt.hooks.manager import PluginHost, discover
from overt.policy.lint import dead_rules
from overt.tools.registry import ToolRegistry

EXIT_OK, EXIT_USAGE = 0, 2
SECRET_KEYS = ("api_key", "token", "secret", "password")
MASK = "********"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = sub.add_parser("config", help="the config file (overt.toml): check it, show it")
    csub = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    for name, text in (("check", "validate the config file; every problem with its line"),
                       ("show", "the effective config: file, env and flags (secrets masked)")):
        cmd = csub.add_parser(name, help=text)  # --config: a global flag, here too
        if name == "show":
            cmd.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, load: Callable[[], Config]) -> int:
    """``load`` builds the effective config as the other commands would."""
    if args.config_command == "check":
        return check(args.config)
    config = load()
    view = effective(config)
    if args.json:
        print(json.dumps(view, indent=2, default=str))
    else:
        print(as_toml(view))
    return EXIT_OK


def check(path: str | None) -> int:
    """Print ``ok: <summary>`` (0) or every problem (2)."""
    try:
        found = config_file.find(path)
        if found is None:
            raise ConfigError("no config file: pass --config PATH, set OVERT_CONFIG, or "
                              f"create ./{config_file.DEFAULT_NAME}")
        cfg = config_file.read(found)
        problems = _plugin_problems(str(found), cfg.plugins.enabled, cfg.plugins.files)
        if problems:
            raise config_file.ConfigFileError(problems)
        config = config_file.load(path=found)
        dead = _dead_rules(config)
    except (ConfigError, PluginError) as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    for line in dead:
        print(f"warning: {line}", file=sys.stderr)
    print(f"ok: {summary(config)}")
    return EXIT_OK


def _dead_rules(config: Config) -> list[str]:
    """The policy rules that match none of the tools the enabled plugins give (and
    the route offers): :func:`overt.policy.lint.dead_rules`. An MCP server's tools
    are known only once overt starts, which checks again then."""
    host = PluginHost.load(config.plugins_enabled, config.plugins_disabled,
                           config.plugin_files)
    registry = ToolRegistry()
    host.add_tools(registry)
    route = config.active_route
    specs = [s for s in registry.specs()
             if route is None or route.tools is None or s.name in route.tools]
    lines = dead_rules(config.policy.rules, specs, routes=list(config.routes))
    if config.mcp_servers:
        lines = [f"{line}; tools of MCP servers are not known until overt starts, "
                 "which checks again" for line in lines]
    return lines


def _plugin_problems(path: str, enabled: list[str],
                     files: list[str]) -> list[config_file.Problem]:
    """``plugins.enabled`` names that no installed plugin or file answers to."""
    known = {c.name for c in discover(files)}  # `router` comes with a route, not from here
    with open(path, encoding="utf-8") as file:
        lines = key_lines(file.read())
    return [config_file.Problem(path, line_of(lines, ("plugins", "enabled", i)),
                                f"plugins.enabled[{i}]",
                                f"no installed plugin {name!r} (installed: "
                                f"{', '.join(sorted(known))})")
            for i, name in enumerate(enabled) if name not in known]


def summary(config: Config) -> str:
    """One line: the file, the model and route, what the route does, what else is set."""
    parts = [f"{config.config_file}: model {config.model}, route {config.route}"]
    route = config.active_route
    if route is not None:
        if route.escalate_to:
            parts.append(f"escalates to {route.escalate_to}")
        if route.fallback:
            parts.append(f"falls back to {', '.join(route.fallback)}")
        if route.tools is not None:
            parts.append(f"tools {', '.join(route.tools) or 'none'}")
    parts.append(f"{len(config.model_aliases)} models, {len(config.routes)} routes, "
                 f"{len(config.prices)} prices")
    budget = config.effective_budget
    if not budget.empty:
        parts.append("budget " + " ".join(f"{f.name}={getattr(budget, f.name)}"
                                          for f in fields(budget)
                                          if getattr(budget, f.name) is not None))
    if config.plugins_enabled:
        parts.append(f"plugins {', '.join(config.plugins_enabled)}")
    return "; ".join(parts)


def effective(config: Config) -> dict[str, Any]:
    """``config`` as plain data, secrets masked."""
    return {f.name: _plain(f.name, getattr(config, f.name)) for f in fields(config)}


def _plain(key: str, value: Any) -> Any:
    if any(s in key.lower() for s in SECRET_KEYS) and value:
        return MASK
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(f.name, getattr(value, f.name)) for f in fields(value)
                if not f.name.startswith("_")}
    if isinstance(value, Mapping):
        return {str(k): _plain(str(k), v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain("", v) for v in value]
    return value


def as_toml(view: Mapping[str, Any]) -> str:
    """Plain data as TOML-like text (tables for mappings, ``# none`` for unset values)."""
    lines: list[str] = []
    _emit(view, (), lines)
    return "\n".join(lines).strip()


def _emit(table: Mapping[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    if path and (scalars or not table):
        lines += ["", f"[{'.'.join(_key(p) for p in path)}]"]
    for key, value in scalars.items():
        lines.append(f"{_key(key)} = {_value(value)}" if value is not None
                     else f"# {_key(key)} = (none)")
    for key, value in table.items():
        if isinstance(value, Mapping):
            _emit(value, (*path, key), lines)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
