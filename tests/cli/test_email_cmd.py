"""``overt email poll --once`` from overt.toml against real IMAP and SMTP servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.channels.mail_servers import dovecot, smtp_server
from tests.channels.test_email import AGENT, OWNER, deliver, unseen

pytestmark = pytest.mark.email  # a real Dovecot IMAP server (mail_servers.py)


def test_email_poll_once_answers_the_mailbox_named_in_overt_toml(tmp_path: Path) -> None:
    (tmp_path / "answer.jsonl").write_text('{"text": "Answered from the CLI."}\n')
    with dovecot(tmp_path) as imap, smtp_server() as (sink, smtp_port):
        (tmp_path / "overt.toml").write_text(f"""
[email]
imap_host = "{imap.host}"
imap_port = {imap.port}
imap_user = "{imap.user}"
imap_ssl = false
smtp_host = "127.0.0.1"
smtp_port = {smtp_port}
smtp_starttls = false
allowed_senders = ["{OWNER}"]
from_address = "{AGENT}"
""")
        deliver(imap, message_id="<cli1@example.org>")
        env = {**os.environ, "OVERT_DB": str(tmp_path / "ledger.db"), "OVERT_TRANSCRIPT": "",
               "OVERT_MODEL": f"scripted:{tmp_path / 'answer.jsonl'}",
               "OVERT_IMAP_PASSWORD": imap.password}
        done = subprocess.run([sys.executable, "-m", "overt.cli", "email", "poll", "--once",
                               "--json"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"<cli1@example.org>": "answered"}
        assert [m["In-Reply-To"] for m in sink.messages] == ["<cli1@example.org>"]
        assert unseen(imap) == []
        del env["OVERT_IMAP_PASSWORD"]
        missing = subprocess.run([sys.executable, "-m", "overt.cli", "email", "poll",
                                  "--once"], cwd=tmp_path, env=env, capture_output=True,
                                 text=True, timeout=120)
        assert missing.returncode == 2 and "OVERT_IMAP_PASSWORD" in missing.stderr
