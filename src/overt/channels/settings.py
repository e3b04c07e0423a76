"""Settings of the Slack and email channels, as values (secrets resolved by entry points).

Kept apart from the channels so :mod:`overt.config` can hold them without
importing slack_sdk or anything else a channel needs.
"""

from __future__ import annotations

from dataclasses import dataclass

SLACK_API_BASE_URL = "https://slack.com/api/"


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """``[slack]``: who may DM the agent and how to reach Slack.

    ``signing_secret_env`` and ``bot_token_env`` name the variables entry points
    read the secrets from; ``api_base_url`` is Slack's Web API (a local server in
    tests). ``allowed_users`` are Slack user ids (``U...``); nobody else is answered.
    """

    allowed_users: tuple[str, ...] = ()
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    bot_token_env: str = "SLACK_BOT_TOKEN"
    api_base_url: str = SLACK_API_BASE_URL
    path: str = "/slack/events"


@dataclass(frozen=True, slots=True)
class EmailSettings:
    """``[email]``: the IMAP mailbox polled, the SMTP server replies leave by, and the
    senders answered (addresses, compared case-insensitively)."""

    imap_host: str = "localhost"
    imap_port: int = 993
    imap_user: str = ""
    imap_password_env: str = "OVERT_IMAP_PASSWORD"
    imap_ssl: bool = True
    mailbox: str = "INBOX"
    smtp_host: str = "localhost"
    smtp_port: int = 587
    smtp_user: str | None = None
    smtp_password_env: str | None = None
    smtp_starttls: bool = True
    allowed_senders: tuple[str, ...] = ()
    from_address: str = ""
    poll_interval_s: float = 60.0
