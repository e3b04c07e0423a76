"""``overt email poll [--once]``: answer the mailbox named in ``[email]``.

The IMAP and SMTP passwords are read from the variables ``[email]`` names
(``imap_password_env``, ``smtp_password_env``), by
:func:`overt.cli.repliers.email_channel`, as for every entry point that replies
by email.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING

from overt.config import Config
from overt.errors import ConfigError

if TYPE_CHECKING:
    from overt.channels.email import EmailChannel
    from overt.channels.settings import EmailSettings
    from overt.runtime import Runtime

COMMANDS = ("email",)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    email = sub.add_parser("email", help="the email channel ([email] in overt.toml)")
    esub = email.add_subparsers(dest="email_command", required=True, metavar="COMMAND")
    poll = esub.add_parser("poll", help="answer unread mail from allowed senders")
    poll.add_argument("--once", action="store_true", help="poll once and exit")
    poll.add_argument("--json", action="store_true", help="one JSON object per poll")


def run(config: Config, args: argparse.Namespace) -> int:
    settings = config.email
    if settings is None:
        raise ConfigError("no [email] table in overt.toml: the email channel is not configured")
    if not os.environ.get(settings.imap_password_env):
        raise ConfigError(f"{settings.imap_password_env} is not set (the IMAP password)")
    return asyncio.run(_poll(config, args.once, args.json))


async def _poll(config: Config, once: bool, as_json: bool) -> int:
    from overt.channels.delivery import DELIVER_EVERY_S, delivering
    from overt.cli.repliers import email_channel
    from overt.runtime import Runtime

    assert config.email is not None
    runtime = Runtime.from_config(config)
    try:
        channel = email_channel(config.email, runtime)
        assert channel is not None  # its password was checked set
        # between polls, answers owed after an approval decided elsewhere (by a process
        # without the mailbox's passwords) leave within seconds, not at the next poll
        async with delivering(runtime, {channel.source: channel},
                              every_s=None if once else DELIVER_EVERY_S):
            return await _polls(config.email, channel, runtime, once, as_json)
    finally:
        await runtime.close()


async def _polls(settings: EmailSettings, channel: EmailChannel, runtime: Runtime,
                 once: bool, as_json: bool) -> int:
    from overt.channels.delivery import deliver_pending

    while True:
        outcomes = await channel.poll_once()
        # answers of turns resumed after an approval, wherever it was decided
        for ids in await deliver_pending(runtime, {channel.source: channel}):
            print(f"{ids.get('message_id', '')}\tanswered_after_approval", flush=True,
                  file=sys.stderr)
        if as_json:
            print(json.dumps(outcomes), flush=True)
        else:
            for message_id, outcome in outcomes.items():
                print(f"{message_id}\t{outcome}", flush=True)
        if once:
            return 0
        await asyncio.sleep(settings.poll_interval_s)  # the poll interval itself
