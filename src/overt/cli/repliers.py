"""The channels this process can reply on, built from config and the secrets the
environment holds (entry points only: the library never reads the environment).

A channel whose secrets are not set here is left out: this process then does
not deliver on it, and the process that has them (``overt serve``, ``overt
email poll``) delivers what is owed the next time it sweeps.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from overt.config import Config

if TYPE_CHECKING:
    from overt.channels.delivery import Replier
    from overt.channels.email import EmailChannel
    from overt.channels.settings import EmailSettings
    from overt.runtime import Runtime


def repliers(config: Config, runtime: Runtime) -> dict[str, Replier]:
    """Slack (``[slack]`` and both its secrets set) and email (``[email]`` and its
    IMAP password set), by source."""
    out: dict[str, Replier] = {}
    slack = config.slack
    if slack is not None:
        secret = os.environ.get(slack.signing_secret_env)
        token = os.environ.get(slack.bot_token_env)
        if secret and token:
            from overt.channels.slack import SlackDMHandler
            out["slack_dm"] = SlackDMHandler(runtime, signing_secret=secret, bot_token=token,
                                             allowed_users=slack.allowed_users,
                                             api_base_url=slack.api_base_url,
                                             actors=dict(slack.actors),
                                             default_actor=slack.default_actor,
                                             dm_session_idle_s=slack.dm_session_idle_s)
    channel = email_channel(config.email, runtime) if config.email is not None else None
    if channel is not None:
        out["email"] = channel
    return out


def email_channel(settings: EmailSettings, runtime: Runtime) -> EmailChannel | None:
    """The email channel of ``[email]``, with the passwords the variables it names
    hold; ``None`` when the IMAP password is not set here."""
    imap_password = os.environ.get(settings.imap_password_env)
    if not imap_password:
        return None
    from overt.channels.email import EmailChannel
    smtp = os.environ.get(settings.smtp_password_env) if settings.smtp_password_env else None
    return EmailChannel(runtime, settings, imap_password=imap_password, smtp_password=smtp)
