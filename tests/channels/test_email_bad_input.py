"""Mail overt must neither choke on nor misread, against Dovecot (IMAP) and aiosmtpd
(SMTP): raw messages as other mail software writes them, appended to the mailbox."""

from __future__ import annotations

import imaplib
from dataclasses import replace

import pytest

from overt.channels.email import EmailChannel
from overt.channels.settings import EmailSettings
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from tests.channels.helpers import echo_model
from tests.channels.mail_servers import Imap, SmtpSink
from tests.channels.test_email import AGENT, OWNER, data, servers, unseen
from tests.conftest import RuntimeFactory, run

pytestmark = pytest.mark.email  # a real Dovecot IMAP server (mail_servers.py)

__all__ = ["servers"]  # the fixture, used by name


def append(imap: Imap, *messages: bytes) -> None:
    conn = imaplib.IMAP4(imap.host, imap.port)
    conn.login(imap.user, imap.password)
    for raw in messages:
        assert conn.append("INBOX", None, None, raw)[0] == "OK"
    conn.logout()


def mail(message_id: str, headers: str, body: str, *, sender: str = OWNER) -> bytes:
    head = f"From: Owner <{sender}>\r\nTo: {AGENT}\r\nSubject: Disk\r\n"
    if message_id:
        head += f"Message-ID: {message_id}\r\n"
    return (head + headers + "\r\n" + body).encode("latin-1")


UNKNOWN_CHARSET = mail("<c1@example.org>",
                       "Content-Type: text/plain; charset=x-mac-klingon\r\n",
                       "is the disk full?\r\n")
UNDECLARED_UTF8 = (f"From: {OWNER}\r\nTo: {AGENT}\r\nSubject: Disk\r\n"
                   "Message-ID: <u1@example.org>\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
                   "Is the café disk full?\r\n").encode()  # as a script's mail(1) sends it
BROKEN_MESSAGE_ID = mail("<<<@@@", "", "and the backups?\r\n")
HTML_ONLY = mail("<h1@example.org>", "Content-Type: text/html; charset=utf-8\r\n",
                 "<html><head><style>p{}</style></head><body><p>Is the <b>disk</b> "
                 "&lt; 90% full?</p><p>Thanks</p></body></html>\r\n")
ATTACHMENT_ONLY = mail(
    "<f1@example.org>", "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XX\r\n",
    "--XX\r\nContent-Type: application/pdf\r\n"
    "Content-Disposition: attachment; filename=df.pdf\r\n"
    "Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--XX--\r\n")


def test_mail_the_parser_chokes_on_is_answered_and_the_rest_of_the_poll_goes_on(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        ledger: Ledger) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(echo_model()), settings, imap_password=imap.password)
    append(imap, UNKNOWN_CHARSET, BROKEN_MESSAGE_ID, UNDECLARED_UTF8,
           mail("<ok@example.org>", "", "a plain question\r\n"))

    async def main() -> dict[str, str]:
        return dict(await channel.poll_once())
    assert run(main()) == {"<c1@example.org>": "answered", "<<<@@@": "answered",
                           "<u1@example.org>": "answered", "<ok@example.org>": "answered"}
    assert sorted(m.get_content().strip() for m in sink.messages) == [
        "re: Is the café disk full?", "re: a plain question", "re: and the backups?",
        "re: is the disk full?"]
    assert unseen(imap) == []


def test_html_only_and_attachment_only_mail_reach_the_model_as_what_they_hold(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(echo_model()), settings, imap_password=imap.password)
    append(imap, HTML_ONLY, ATTACHMENT_ONLY)

    async def main() -> dict[str, str]:
        return dict(await channel.poll_once())
    assert set(run(main()).values()) == {"answered"}
    assert sorted(m.get_content().strip().replace("\r\n", "\n") for m in sink.messages) == [
        "re: Disk\n[attachment, not read: df.pdf (application/pdf)]",
        "re: Is the disk < 90% full?\nThanks"]


def test_a_mail_written_all_in_its_subject_reaches_the_model_as_its_subject(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(echo_model()), settings, imap_password=imap.password)
    append(imap, (f"From: {OWNER}\r\nTo: {AGENT}\r\nSubject: How full is the disk?\r\n"
                  "Message-ID: <s1@example.org>\r\n\r\n\r\n").encode())

    async def main() -> dict[str, str]:
        return dict(await channel.poll_once())
    assert run(main()) == {"<s1@example.org>": "answered"}
    assert [m.get_content().strip() for m in sink.messages] == ["re: How full is the disk?"]


def test_autoreplies_bounces_and_our_own_mail_are_not_answered(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        ledger: Ledger) -> None:
    imap, sink, settings = servers
    settings = replace(settings, allowed_senders=(OWNER, AGENT))  # a careless list
    channel = EmailChannel(make_runtime(ScriptedModel([])), settings,
                           imap_password=imap.password)
    append(imap,
           mail("<v1@example.org>", "Precedence: bulk\r\n", "I am away until Monday.\r\n"),
           mail("<v2@example.org>", "X-Autoreply: yes\r\n", "I am away.\r\n"),
           mail("<b1@example.org>", "Return-Path: <>\r\n", "Delivery failed.\r\n"),
           mail("<b2@example.org>", "MIME-Version: 1.0\r\nContent-Type: multipart/report; "
                "report-type=delivery-status; boundary=B\r\n",
                "--B\r\nContent-Type: text/plain\r\n\r\nundeliverable\r\n--B--\r\n"),
           mail("<o1@overt.example>", "", "a copy of our own reply\r\n", sender=AGENT))

    async def main() -> dict[str, str]:
        return dict(await channel.poll_once())
    assert set(run(main()).values()) == {"filtered"}
    assert [r["filtered"] for r in run(data(ledger, "channel.received"))] == \
        ["bot_message"] * 5
    assert sink.messages == [] and unseen(imap) == []
