"""An answer that waited for an approval leaves within seconds when the approval comes
from a process without the channel's secrets (``overt approvals approve`` from another
shell): the process holding the channel looks for the answers it owes. Real
processes: ``overt serve`` with Slack against a local Slack Web API, and ``overt
email poll`` against Dovecot and an SMTP server."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message
from pathlib import Path

import aiohttp
import pytest

from overt.ledger import open_ledger
from tests.channels.fake_slack import fake_slack_api
from tests.channels.mail_servers import SmtpSink, dovecot, smtp_server
from tests.channels.test_email import AGENT, OWNER, deliver
from tests.channels.test_slack import DM, SECRET, TOKEN, event, signed
from tests.channels.test_slack import OWNER as SLACK_OWNER
from tests.channels.workers import CLI, Setup, setup, workers
from tests.conftest import run

PROMPTLY_S = 10.0
"""Well under the next event or poll that used to carry such an answer (75 s and more
on Slack; a 10-minute poll interval here), well over the look interval (2 s)."""


def approve_without(made: Setup, request_id: str, *secrets: str) -> None:
    """``overt approvals approve`` in another process, whose environment lacks
    ``secrets``: it decides and resumes the turn, and cannot deliver its answer."""
    env = {k: v for k, v in made.env.items() if k not in secrets}
    done = subprocess.run([*CLI, "approvals", "approve", request_id], env=env,
                          cwd=made.directory, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def held_request(url: str) -> str:
    ledger = open_ledger(url)
    try:
        [requested] = run(ledger.entries(kinds=["approval.requested"]))
        return str(requested.data["request_id"])
    finally:
        run(ledger.close())


@pytest.mark.slow
def test_a_slack_answer_approved_from_a_shell_without_the_slack_secrets_arrives_promptly(
        ledger_url: str, tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_slack_api(TOKEN) as slack, aiohttp.ClientSession() as http:
            made = setup(tmp_path, ledger_url, slack_api=slack.base_url,
                         slack_user=SLACK_OWNER, slack_secret=SECRET, slack_token=TOKEN)
            with workers(made, 1) as [worker]:
                body, headers = signed(event("payroll please", event_id="EvHELD"))
                async with http.post(f"{worker.url}/slack/events", data=body,
                                     headers=headers) as response:
                    assert response.status == 200
                [held] = await slack.wait_for_posts(1, timeout=60)
                assert "approval" in held["text"]
                request_id = await asyncio.to_thread(held_request, ledger_url)
                await asyncio.to_thread(approve_without, made, request_id,
                                        "SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN")
                decided = time.monotonic()
                posts = await slack.wait_for_posts(2, timeout=PROMPTLY_S)
                assert time.monotonic() - decided < PROMPTLY_S
                assert len(posts) == 2
        answer = posts[1]
        assert answer["text"].startswith("payroll:")
        assert (answer["channel"], answer["thread_ts"]) == (DM, held["thread_ts"])
        ledger = open_ledger(ledger_url)
        try:
            replied = [e.data for e in await ledger.entries(kinds=["channel.replied"])]
        finally:
            await ledger.close()
        assert [r["resumed_from"] for r in replied] == [None, request_id]
    run(main())


@contextmanager
def email_poller(made: Setup) -> Iterator[subprocess.Popen[bytes]]:
    log = made.directory / "poll.log"
    with log.open("wb") as out:
        process = subprocess.Popen([*CLI, "email", "poll"], env=made.env, cwd=made.directory,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=60)


def mails(sink: SmtpSink, count: int, timeout_s: float,
          poller: subprocess.Popen[bytes]) -> list[Message]:
    """The first ``count`` messages the SMTP server took, within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with sink.lock:
            if len(sink.messages) >= count:
                return list(sink.messages)
        assert poller.poll() is None, "the poller exited"
        assert time.monotonic() < deadline, f"{len(sink.messages)} of {count} mails sent"
        time.sleep(0.05)  # another process sends: nothing here to wait on but the server


@pytest.mark.slow
def test_an_emailed_answer_approved_from_a_shell_without_the_mailbox_password_arrives_promptly(
        ledger_url: str, tmp_path: Path) -> None:
    with dovecot(tmp_path) as imap, smtp_server() as (sink, smtp_port):
        made = setup(tmp_path, ledger_url)
        with (tmp_path / "overt.toml").open("a") as config:
            config.write(f"""
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
poll_interval_s = 600
""")
        made.env["OVERT_IMAP_PASSWORD"] = imap.password
        deliver(imap, message_id="<pay1@example.org>", subject="Payroll",
                text="payroll please")
        with email_poller(made) as poller:
            [held] = mails(sink, 1, 60, poller)
            assert "approval" in held.get_content()
            request_id = held_request(ledger_url)
            approve_without(made, request_id, "OVERT_IMAP_PASSWORD")
            decided = time.monotonic()
            sent = mails(sink, 2, PROMPTLY_S, poller)
            assert time.monotonic() - decided < PROMPTLY_S
    answer = sent[1]
    assert answer.get_content().startswith("payroll:")
    assert answer["In-Reply-To"] == "<pay1@example.org>" and answer["To"] == OWNER
    assert answer["Subject"] == "Re: Payroll"
