"""Settings of the Slack and email channels, as values (secrets resolved by entry points).

Kept apart from the channels so :mod:`overt.config` can hold them without
importing slack_sdk or anything else a channel needs.
"""

from __future__ import annotations

from dataclasses import dataclass

SLACK_API_BASE_URL = "https://slack.com/api/"
DM_SESSION_IDLE_S = 1800.0
"""How long a pause ends a Slack DM conversation typed in the main pane."""


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
    actors: tuple[tuple[str, str], ...] = ()
    """(Slack user id, actor): who each person is on the record; their sessions are
    theirs. A user not listed is ``default_actor``."""
    default_actor: str | None = None
    """The actor of a user ``actors`` does not list (``None``: the runtime's operator)."""
    dm_session_idle_s: float = DM_SESSION_IDLE_S
    """A DM typed in the main pane continues the session of the user's previous
    main-pane DM sent less than this many seconds before it (0: each starts one)."""


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
    actors: tuple[tuple[str, str], ...] = ()
    """(sender address, actor): who each person is on the record (addresses compared
    case-insensitively); a sender not listed is ``default_actor``."""
    default_actor: str | None = None
    """The actor of a sender ``actors`` does not list (``None``: the runtime's operator)."""


def actor_of(actors: tuple[tuple[str, str], ...], default: str | None, who: str) -> str | None:
    """The actor ``who`` (a Slack user id, a lower-cased address) is mapped to, else
    ``default`` (``None``: the runtime's operator)."""
    return next((actor for key, actor in actors if key == who), default)
