"""``overt sessions``: the conversations on the record, and one read as a conversation.

Attached by :mod:`overt.cli.main`: :func:`add_parser` adds the command, :func:`run`
runs it on an open ledger. :func:`existing` is how ``ask --session`` and ``chat
--resume`` find the session they continue.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from overt.cli import flags
from overt.cli.flags import count_flag
from overt.errors import NotFoundError
from overt.ledger.base import Ledger
from overt.sessions import SessionInfo, flatten, list_sessions, session_history, session_info
from overt.sessions.book import title
from overt.types import Message

COMMANDS = ("sessions",)
EXIT_OK = 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sessions`` (list) and ``sessions show ID`` to the ``overt`` commands."""
    sessions = sub.add_parser("sessions", help="conversations: list them, or show one")
    sessions.add_argument("--limit", type=count_flag, default=20)
    sessions.add_argument("--channel", help="only this channel's (cli, http, slack_dm, "
                                            "email, mcp)")
    sessions.add_argument("--owner", metavar="ACTOR", type=flags.actor, help="only this actor's")
    sessions.add_argument("--json", action="store_true")
    ssub = sessions.add_subparsers(dest="sessions_command", metavar="COMMAND")
    show = ssub.add_parser("show", help="one session as the conversation it was")
    show.add_argument("session_id", type=flags.session_id)
    show.add_argument("--json", action="store_true")


async def existing(ledger: Ledger, session_id: str) -> SessionInfo:
    """The session ``session_id``.

    Raises:
        NotFoundError: no turn was recorded under it.
    """
    info = await session_info(ledger, session_id)
    if info is None:
        raise NotFoundError(f"no session {session_id!r}")
    return info


async def last_cli_session(ledger: Ledger) -> SessionInfo:
    """The most recently active session of the command line.

    Raises:
        NotFoundError: there is none yet.
    """
    found = await list_sessions(ledger, source="cli", limit=1)
    if not found:
        raise NotFoundError("no earlier command-line session to resume")
    return found[0]


async def run(args: argparse.Namespace, ledger: Ledger) -> int:
    """Run ``overt sessions`` or ``overt sessions show``.

    Raises:
        NotFoundError: ``show`` names no session.
    """
    if args.sessions_command == "show":
        return await _show(ledger, args.session_id, as_json=args.json)
    found = await list_sessions(ledger, owner=args.owner, source=args.channel,
                                limit=max(1, args.limit))
    rows = [(s, await title(ledger, s)) for s in found]
    if args.json:
        print(json.dumps([_info(s, t) for s, t in rows], ensure_ascii=False, indent=2))
        return EXIT_OK
    if not rows:
        print("no sessions recorded yet")
        return EXIT_OK
    print(f"{'session id':34}  {'channel':8}  {'owner':20}  {'turns':>5}  "
          f"{'last activity (UTC)':24}  title")
    for s, t in rows:
        print(f"{s.session_id:34}  {s.source:8}  {s.owner:20}  {s.turns:>5}  {s.last_at:24}  {t}")
    return EXIT_OK


def _info(s: SessionInfo, shown_title: str) -> dict[str, Any]:
    return {"session_id": s.session_id, "channel": s.source, "owner": s.owner,
            "turns": s.turns, "started_at": s.started_at, "last_at": s.last_at,
            "title": shown_title}


async def _show(ledger: Ledger, session_id: str, *, as_json: bool) -> int:
    info = await existing(ledger, session_id)
    turns = await session_history(ledger, session_id)
    if as_json:
        print(json.dumps({**_info(info, await title(ledger, info)), "conversation": [
            {"turn_id": t.turn_id, "messages": [m.to_dict() for m in t.messages]}
            for t in turns]}, ensure_ascii=False, indent=2))
        return EXIT_OK
    print(f"session {info.session_id} ({info.source}, owner {info.owner}, {info.turns} turns, "
          f"last {info.last_at})")
    for message in flatten(turns):
        print(_line(message))
    return EXIT_OK


def _line(m: Message) -> str:
    if m.tool_calls:
        return "\n".join(
            f"  [tool call] {c.name} {json.dumps(dict(c.arguments), ensure_ascii=False)}"
            for c in m.tool_calls)
    if m.role == "tool":
        return f"  [{'tool error' if m.is_error else 'tool result'}] {m.content}"
    return f"{'you' if m.role == 'user' else 'overt'}> {m.content}"
