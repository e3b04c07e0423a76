"""The flags every command takes (``--db``, ``--config``, ...), before or after it.

``overt --db X ask "..."`` and ``overt ask "..." --db X`` are one command, at any
depth (``overt ledger verify --db X``). A flag that takes one value, given before
and after the command with different values, is an error (exit 2): overt does not
guess which ledger or config file was meant. Given twice on one side, the last counts, as for
any flag. A repeatable flag (``--enable-plugin``) adds up from both sides; a switch
(``-v``, ``--read-only``) holds when given on either.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

AFTER = "after_command_"
"""The prefix of where a flag given after the command is kept until :func:`merge`."""

EPILOG = ("Global flags (--db, --read-only, --config, --route, -v, --enable-plugin, "
          "--disable-plugin, --plugin-file) may also follow the command, at any depth "
          "(overt ask TEXT --db X, overt ledger verify --db X); one that takes a value, "
          "given before and after it with different values, is an error.")


@dataclass(frozen=True, slots=True)
class Flag:
    names: tuple[str, ...]
    dest: str
    help: str
    kind: str = "value"
    """``value`` (one value), ``switch`` (store_true) or ``repeat`` (append)."""
    options: dict[str, Any] = field(default_factory=dict)


FLAGS = (
    Flag(("--db",), "db", "ledger: a SQLite file or postgresql://… URL (default: user data "
         "dir; env OVERT_DB)"),
    Flag(("--read-only",), "read_only", "open the ledger writing no record (commands that "
         "only read do so on their own when this process cannot write a SQLite ledger); "
         "a write is refused", "switch"),
    Flag(("--config",), "config", "the config file (default: env OVERT_CONFIG, else "
         "./overt.toml if present); flags and env win over it", options={"metavar": "PATH"}),
    Flag(("--route",), "route", "the route to answer on (env OVERT_ROUTE)",
         options={"metavar": "NAME"}),
    Flag(("-v", "--verbose"), "verbose", "log to stderr", "switch"),
    Flag(("--enable-plugin",), "enable_plugin", "enable a plugin (repeatable; adds to env "
         "OVERT_PLUGINS_ENABLED)", "repeat", {"metavar": "NAME"}),
    Flag(("--disable-plugin",), "disable_plugin", "disable a plugin, even if enabled "
         "(repeatable; env OVERT_PLUGINS_DISABLED)", "repeat", {"metavar": "NAME"}),
    Flag(("--plugin-file",), "plugin_file", "offer a Python file as a plugin named by its "
         "stem (repeatable; env OVERT_PLUGIN_FILES); it runs only if enabled", "repeat",
         {"metavar": "PATH"}),
)

_ACTIONS = {"value": "store", "switch": "store_true", "repeat": "append"}
_DEFAULTS: dict[str, Any] = {"value": None, "switch": False, "repeat": []}


def add(parser: argparse.ArgumentParser) -> None:
    """The flags on ``overt`` itself (before the command), with their defaults."""
    for flag in FLAGS:
        parser.add_argument(*flag.names, dest=flag.dest, action=_ACTIONS[flag.kind],
                            default=_DEFAULTS[flag.kind], help=flag.help, **flag.options)


def add_after(parser: argparse.ArgumentParser) -> None:
    """The same flags on every command and subcommand under ``parser`` (not shown in
    their help: ``overt --help`` lists them once)."""
    for command in _commands(parser):
        for flag in FLAGS:
            if any(name in command._option_string_actions for name in flag.names):
                continue
            command.add_argument(*flag.names, dest=AFTER + flag.dest,
                                 action=_ACTIONS[flag.kind], default=argparse.SUPPRESS,
                                 help=argparse.SUPPRESS, **flag.options)


def merge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with each flag given after the command in its place.

    Exits (2, through ``parser.error``) when a flag that takes one value was given
    before and after the command, with different values.
    """
    for flag in FLAGS:
        after = AFTER + flag.dest
        if not hasattr(args, after):
            continue
        value = getattr(args, after)
        delattr(args, after)
        before = getattr(args, flag.dest)
        if flag.kind == "switch":
            value = before or value
        elif flag.kind == "repeat":
            value = [*before, *value]
        elif before is not None and before != value:
            parser.error(f"{'/'.join(flag.names)} was given before the command "
                         f"({before}) and after it ({value}): give it once")
        setattr(args, flag.dest, value)
    return args


def _commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every command's parser under ``parser``, at every depth, each once."""
    seen: set[int] = set()
    stack = [parser]
    while stack:
        for action in stack.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):
                for command in action.choices.values():
                    if id(command) not in seen:
                        seen.add(id(command))
                        stack.append(command)
                        yield command
