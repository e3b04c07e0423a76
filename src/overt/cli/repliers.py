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
                                             api_base_url=slack.api_base_url)
    email = config.email
    if email is not None and os.environ.get(email.imap_password_env):
        from overt.channels.email import EmailChannel
        smtp = os.environ.get(email.smtp_password_env) if email.smtp_password_env else None
        out["email"] = EmailChannel(runtime, email,
                                    imap_password=os.environ[email.imap_password_env],
                                    smtp_password=smtp)
    return out
