"""Command-line flag values the commands share.

Every argument that names something on the record (a session, turn, approval
request, memory node, eval case) or an actor has an argparse ``type`` from here,
so a bad one is refused while the command line is parsed (exit 2, naming the
argument), before anything opens the ledger: :func:`overt.ids.id_problem` says
what an id is (valid UTF-8 text, 1 to 1024 characters, no control characters;
turn, request and node ids, which overt makes, only letters, digits, ``_`` and
``-``, at most 64).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from overt.clock import period_start
from overt.errors import UsageError
from overt.ids import id_problem
from overt.policy.actors import Actor


def time_flag(value: str | None, flag: str) -> str | None:
    """A ``--since``/``--until`` value as a ledger timestamp (``None`` when not given).

    Raises:
        UsageError: not a time or an age, named with its flag.
    """
    if value is None:
        return None
    try:
        return period_start(value)
    except UsageError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def output_file(path: str) -> TextIO:
    """``--output PATH`` opened for writing (UTF-8, ``\\n`` line ends).

    Raises:
        UsageError: it cannot be opened (a missing folder, a folder, no permission).
    """
    try:
        return Path(path).open("w", encoding="utf-8", newline="\n")
    except OSError as exc:
        raise UsageError(f"--output: cannot write {path}: {exc.strerror or exc}") from None


def port_flag(value: str) -> int:
    """An argparse ``type`` for ``--port``: 0 (any free port) to 65535 (the socket layer
    took 70000 as 4464, modulo 65536, and served there unsaid)."""
    number = _whole(value)
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {number}")
    return number


def bytes_flag(value: str) -> int:
    """An argparse ``type`` for a size in bytes: at least 1."""
    number = _whole(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {number}")
    return number


def _whole(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None


def count_flag(value: str) -> int:
    """An argparse ``type`` for ``--limit``: a whole number from 1 to a million (SQLite
    refuses an integer past 2**63; a negative LIMIT means none)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if not 1 <= number <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be 1 to 1000000, got {number}")
    return number


IDS = ("An id argument (a session, turn, approval request, memory node or eval case) "
       "is valid UTF-8 text of 1 to 1024 characters without control characters (turn, "
       "request and node ids: letters, digits, _ and -), an actor is KIND:NAME: anything "
       "else is exit 2 before the ledger is opened.")


def _id_type(what: str, *, token: bool = False) -> Callable[[str], str]:
    def parse(value: str) -> str:
        problem = id_problem(value, token=token)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"not a {what} id: {problem}")
        return value
    parse.__name__ = f"{what.replace(' ', '_')}_id"
    return parse


session_id = _id_type("session")
"""A session id (its form is the channel's: ``cli:01J...``, ``http:...``)."""
turn_id = _id_type("turn", token=True)
request_id = _id_type("approval request", token=True)
node_id = _id_type("memory node", token=True)
turn_or_session_id = _id_type("turn or session")
case_id = _id_type("eval case")


def session_id_or_last(value: str) -> str:
    """``chat --resume [ID]``: a session id, or nothing (the last session)."""
    return value if value == "" else session_id(value)


def actor(value: str) -> str:
    """An argparse ``type`` for an actor (``KIND:NAME``), checked as an id and parsed."""
    problem = id_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"not an actor: {problem}")
    try:
        Actor.parse(value)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value
