"""``[slack]`` and ``[email]`` in overt.toml become the channels' settings."""

from __future__ import annotations

import pytest

from overt.channels.settings import EmailSettings, SlackSettings
from overt.config.file import ConfigFileError, parse, values

EMAIL = """
[email]
imap_host = "imap.example.org"
imap_user = "agent"
smtp_host = "smtp.example.org"
from_address = "agent@example.org"
allowed_senders = ["me@example.org"]
"""


def test_slack_and_email_tables_become_settings() -> None:
    got = values(parse('[slack]\nallowed_users = ["U0OWNER"]\n' + EMAIL))
    assert got["slack"] == SlackSettings(allowed_users=("U0OWNER",))
    assert got["email"] == EmailSettings(
        imap_host="imap.example.org", imap_user="agent", smtp_host="smtp.example.org",
        from_address="agent@example.org", allowed_senders=("me@example.org",))


def test_a_channel_table_names_its_missing_and_unknown_keys() -> None:
    with pytest.raises(ConfigFileError) as caught:
        parse('[email]\nimap_host = "x"\npassword = "hunter2"\n[slack]\nbot_token = "x"\n')
    fields = [p.field for p in caught.value.problems]
    assert {"email.password", "email.imap_user", "email.from_address",
            "slack.bot_token"} <= set(fields)
