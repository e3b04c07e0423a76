"""The email channel against real servers: Dovecot for IMAP, aiosmtpd for SMTP: which
session a mail continues (RFC 5322 threading, resolved through overt's own
Message-IDs) and whose it is, too."""

from __future__ import annotations

import dataclasses
import imaplib
import json
import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from overt.channels import email as email_channel
from overt.channels.delivery import deliver_resumed
from overt.channels.email import EmailChannel
from overt.channels.settings import EmailSettings
from overt.config.file import parse, values
from overt.errors import ChannelError, LedgerError
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.sessions.book import session_info
from tests.channels.helpers import echo_model, payroll_runtime, said
from tests.channels.mail_servers import Imap, SmtpSink, dovecot, smtp_server
from tests.conftest import RuntimeFactory, run

pytestmark = pytest.mark.email  # a real Dovecot IMAP server (mail_servers.py)

OWNER = "owner@example.org"
AGENT = "agent@overt.example"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Imap, SmtpSink, EmailSettings]]:
    with dovecot(tmp_path) as imap, smtp_server() as (sink, smtp_port):
        settings = EmailSettings(
            imap_host=imap.host, imap_port=imap.port, imap_user=imap.user, imap_ssl=False,
            smtp_host="127.0.0.1", smtp_port=smtp_port, smtp_starttls=False,
            allowed_senders=("Owner@Example.org",), from_address=AGENT)
        yield imap, sink, settings


def deliver(imap: Imap, *, message_id: str, sender: str = f"Owner <{OWNER}>",
            subject: str = "Disk", text: str = "how is my disk?",
            references: str | None = None, **headers: str) -> None:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = AGENT
    msg["Subject"] = subject
    msg["Message-ID"] = message_id
    if references:
        msg["References"] = references
        msg["In-Reply-To"] = references.split()[-1]
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    msg.set_content(text)
    conn = imaplib.IMAP4(imap.host, imap.port)
    conn.login(imap.user, imap.password)
    assert conn.append("INBOX", None, None, msg.as_bytes())[0] == "OK"
    conn.logout()


def unseen(imap: Imap) -> list[str]:
    conn = imaplib.IMAP4(imap.host, imap.port)
    conn.login(imap.user, imap.password)
    conn.select("INBOX")
    found = conn.uid("SEARCH", "UNSEEN")[1][0]
    conn.logout()
    return found.decode().split() if isinstance(found, bytes) else []


async def data(ledger: Ledger, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in await ledger.entries(kinds=[kind])]


def test_an_allowed_sender_is_answered_in_the_same_thread_and_the_mail_marked_handled(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        ledger: Ledger, tmp_path: Path) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(ScriptedModel(["Plenty of space left."])), settings,
                           imap_password=imap.password)
    deliver(imap, message_id="<m1@example.org>", references="<m0@example.org>",
            text="secret-marker: how is my disk?")

    async def main() -> None:
        assert await channel.poll_once() == {"<m1@example.org>": "answered"}
        assert await channel.poll_once() == {}
        [received] = await data(ledger, "channel.received")
        assert (received["claim"], received["sender"], received["filtered"]) == (
            "email:<m1@example.org>", OWNER, None)
        [replied] = await data(ledger, "channel.replied")
        assert replied["reply_ids"]["message_id"] == sink.messages[0]["Message-ID"]
        audit = json.dumps([e.data for e in await ledger.entries(
            kinds=["channel.received", "channel.replied"])])
        assert "secret-marker" not in audit and "Disk" not in audit
    run(main())
    [reply] = sink.messages
    assert reply["In-Reply-To"] == "<m1@example.org>"
    assert reply["References"] == "<m0@example.org> <m1@example.org>"
    assert (reply["Subject"], reply["To"], reply["From"]) == ("Re: Disk", OWNER, AGENT)
    assert reply.get_content().strip() == "Plenty of space left."
    assert sink.envelopes == [(AGENT, [OWNER])]
    assert unseen(imap) == []
    [line] = [json.loads(x) for x in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert (line["source"], line["caller_session_id"]) == ("email", "email:<m1@example.org>")
    assert line["channel"] == {"message_id": "<m1@example.org>"} and line["tools_used"] == []


def test_mail_not_to_answer_is_recorded_filtered_marked_and_not_answered(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        ledger: Ledger) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(ScriptedModel([])), settings,
                           imap_password=imap.password)
    deliver(imap, message_id="<s1@example.net>", sender="someone@example.net")
    deliver(imap, message_id="<a1@example.org>", Auto_Submitted="auto-replied")
    deliver(imap, message_id="<s2@example.net>", sender="someone@example.net",
            Reply_To=OWNER)

    async def main() -> None:
        assert await channel.poll_once() == {"<s1@example.net>": "filtered",
                                             "<a1@example.org>": "filtered",
                                             "<s2@example.net>": "filtered"}
        received = await data(ledger, "channel.received")
        assert [r["filtered"] for r in received] == ["sender_not_allowed", "bot_message",
                                                     "sender_not_allowed"]
        assert await ledger.entries(kinds=["turn.started"]) == []
    run(main())
    assert sink.messages == [] and unseen(imap) == []


def test_a_crash_after_the_reply_is_recorded_only_marks_the_mail_on_the_next_poll(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        monkeypatch: pytest.MonkeyPatch, ledger: Ledger) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(ScriptedModel(["Once.", "Twice!"])), settings,
                           imap_password=imap.password)
    deliver(imap, message_id="<c1@example.org>")
    real_mark = channel.mailbox.mark_seen

    def dies(uid: str) -> None:
        raise ChannelError("connection lost")

    async def main() -> None:
        monkeypatch.setattr(channel.mailbox, "mark_seen", dies)
        with pytest.raises(ChannelError):
            await channel.poll_once()
        assert len(unseen(imap)) == 1
        monkeypatch.setattr(channel.mailbox, "mark_seen", real_mark)
        assert await channel.poll_once() == {"<c1@example.org>": "already_replied"}
        assert len(await data(ledger, "channel.replied")) == 1
    run(main())
    assert [m.get_content().strip() for m in sink.messages] == ["Once."]
    assert unseen(imap) == []


def test_a_reply_smtp_refuses_is_recorded_and_the_mail_answered_on_the_next_poll(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        monkeypatch: pytest.MonkeyPatch, ledger: Ledger) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(ScriptedModel(["First try.", "Second try."])),
                           settings, imap_password=imap.password)
    deliver(imap, message_id="<r1@example.org>")
    real_send = channel._smtp_send

    def refused(msg: EmailMessage) -> None:
        raise smtplib.SMTPServerDisconnected("gone")

    async def main() -> None:
        monkeypatch.setattr(channel, "_smtp_send", refused)
        assert await channel.poll_once() == {"<r1@example.org>": "reply_failed"}
        [failed] = await data(ledger, "channel.reply_failed")
        assert failed["error_type"] == "SMTPServerDisconnected"
        monkeypatch.setattr(channel, "_smtp_send", real_send)
        assert await channel.poll_once() == {"<r1@example.org>": "answered"}
        assert len(await data(ledger, "channel.received")) == 1
    run(main())
    assert [m.get_content().strip() for m in sink.messages] == ["Second try."]
    assert unseen(imap) == []


def test_a_crash_between_sending_and_recording_resends_with_the_same_message_id(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(ScriptedModel(["Answer.", "Answer."])), settings,
                           imap_password=imap.password)
    deliver(imap, message_id="<w1@example.org>")
    real_record = email_channel.record_reply

    async def dies(*args: Any, **kwargs: Any) -> None:
        raise LedgerError("ledger went away")

    async def main() -> None:
        monkeypatch.setattr(email_channel, "record_reply", dies)
        with pytest.raises(LedgerError):
            await channel.poll_once()
        monkeypatch.setattr(email_channel, "record_reply", real_record)
        assert await channel.poll_once() == {"<w1@example.org>": "answered"}
    run(main())
    first, second = sink.messages
    assert first["Message-ID"] == second["Message-ID"]  # the recipient sees one message


def test_an_answer_that_waited_for_approval_is_emailed_in_the_same_thread_once(
        servers: tuple[Imap, SmtpSink, EmailSettings], ledger: Ledger) -> None:
    imap, sink, settings = servers
    runtime = payroll_runtime(ledger, ScriptedModel([
        {"tool_calls": [{"name": "payroll", "arguments": {"month": "2026-10"}}]},
        "Payroll for October was 42."]))
    channel = EmailChannel(runtime, settings, imap_password=imap.password)
    deliver(imap, message_id="<p1@example.org>", subject="Payroll")

    async def main() -> None:
        assert await channel.poll_once() == {"<p1@example.org>": "answered"}
        [replied] = await data(ledger, "channel.replied")
        resumed = await runtime.approve(replied["awaiting_approval"])
        assert await deliver_resumed(resumed, ledger, {"email": channel}) is not None
        assert await deliver_resumed(resumed, ledger, {"email": channel}) is None
    run(main())
    waiting, answer = sink.messages
    assert "approval" in waiting.get_content()
    assert answer.get_content().strip() == "Payroll for October was 42."
    for msg in (waiting, answer):
        assert (msg["In-Reply-To"], msg["Subject"]) == ("<p1@example.org>", "Re: Payroll")
    assert waiting["Message-ID"] != answer["Message-ID"]


def test_a_mail_without_a_message_id_gets_a_key_of_its_own_not_its_uid() -> None:
    def raw(body: str) -> bytes:
        return (f"From: {OWNER}\r\nTo: {AGENT}\r\nSubject: hi\r\n\r\n{body}\r\n").encode()

    first = email_channel.parse_mail("7", raw("disk?"))
    again = email_channel.parse_mail("7", raw("disk?"))  # the same mail, read at the next poll
    later = email_channel.parse_mail("7", raw("memory?"))  # a UID the server handed out again
    assert first.message_id == again.message_id  # claimed once, however often it is read
    assert later.message_id != first.message_id and "uid" not in first.message_id
    assert email_channel.thread_key(first) != email_channel.thread_key(later)


def test_a_reply_in_the_mail_thread_reaches_the_model_with_the_thread_so_far(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        ledger: Ledger) -> None:
    imap, sink, settings = servers
    model = echo_model()
    channel = EmailChannel(make_runtime(model), settings, imap_password=imap.password)

    async def main() -> None:
        deliver(imap, message_id="<a1@example.org>", text="my name is Ada")
        assert await channel.poll_once() == {"<a1@example.org>": "answered"}
        ours = sink.messages[0]["Message-ID"]
        deliver(imap, message_id="<a2@example.org>", text="what is my name?",
                references=f"<a1@example.org> {ours}")
        deliver(imap, message_id="<b1@example.org>", text="a new thread")
        assert await channel.poll_once() == {"<a2@example.org>": "answered",
                                             "<b1@example.org>": "answered"}
    run(main())
    assert said(model.requests[1]) == [("user", "my name is Ada"),
                                       ("assistant", "re: my name is Ada"),
                                       ("user", "what is my name?")]
    assert said(model.requests[2]) == [("user", "a new thread")]
    sessions = [e.session_id for e in run(ledger.entries(kinds=["turn.started"]))]
    assert sessions == ["email:<a1@example.org>"] * 2 + ["email:<b1@example.org>"]
    ours = sink.messages[0]["Message-ID"]
    assert sink.messages[1]["References"] == f"<a1@example.org> {ours} <a2@example.org>"


def test_a_mail_without_a_message_id_is_answered_once_under_the_key_overt_made(
        servers: tuple[Imap, SmtpSink, EmailSettings], make_runtime: RuntimeFactory,
        ledger: Ledger) -> None:
    imap, sink, settings = servers
    channel = EmailChannel(make_runtime(ScriptedModel(["Noted.", "Never sent."])), settings,
                           imap_password=imap.password)
    raw = f"From: {OWNER}\r\nTo: {AGENT}\r\nSubject: no id\r\n\r\nremember the milk\r\n"
    conn = imaplib.IMAP4(imap.host, imap.port)
    conn.login(imap.user, imap.password)
    assert conn.append("INBOX", None, None, raw.encode())[0] == "OK"
    conn.select("INBOX")
    [uid] = conn.uid("SEARCH", "ALL")[1][0].decode().split()
    stored = conn.uid("FETCH", uid, "(BODY.PEEK[])")[1][0][1]  # the bytes a poll reads
    conn.logout()

    async def main() -> tuple[dict[str, str], str]:
        outcomes = await channel.poll_once()
        # read again, as after a crash before it was marked seen: the same key, once
        return outcomes, await channel.handle(email_channel.parse_mail(uid, stored))
    outcomes, again = run(main())
    [(key, outcome)] = outcomes.items()
    assert outcome == "answered" and again == "already_replied"
    assert key.endswith(".nomsgid@overt.invalid>") and len(sink.messages) == 1
    assert sink.messages[0]["In-Reply-To"] == key
    [started] = run(ledger.entries(kinds=["turn.started"]))
    assert started.session_id == f"email:{key}"


Servers = tuple[Imap, SmtpSink, EmailSettings]


def sessions(ledger: Ledger) -> list[str | None]:
    return [e.session_id for e in run(ledger.entries(kinds=["turn.started"]))]


def test_a_reply_to_overts_answer_with_only_in_reply_to_continues_the_conversation(
        servers: Servers, make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    imap, sink, settings = servers
    model = echo_model()
    channel = EmailChannel(make_runtime(model), settings, imap_password=imap.password)

    async def main() -> None:
        deliver(imap, message_id="<a1@example.org>", text="my name is Ada")
        assert await channel.poll_once() == {"<a1@example.org>": "answered"}
        ours = sink.messages[0]["Message-ID"]
        # a client or a script that writes In-Reply-To and no References
        deliver(imap, message_id="<a2@example.org>", text="what is my name?",
                In_Reply_To=ours)
        assert await channel.poll_once() == {"<a2@example.org>": "answered"}
        # In-Reply-To a message overt received, not its answer
        deliver(imap, message_id="<a3@example.org>", text="still there?",
                In_Reply_To="<a2@example.org>")
        assert await channel.poll_once() == {"<a3@example.org>": "answered"}
    run(main())
    assert said(model.requests[1]) == [("user", "my name is Ada"),
                                       ("assistant", "re: my name is Ada"),
                                       ("user", "what is my name?")]
    assert said(model.requests[2])[-1] == ("user", "still there?")
    assert ("user", "my name is Ada") in said(model.requests[2])
    assert sessions(ledger) == ["email:<a1@example.org>"] * 3
    assert sink.messages[1]["In-Reply-To"] == "<a2@example.org>"


def test_references_win_over_in_reply_to_and_an_unknown_thread_starts_at_its_first_id(
        servers: Servers, make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    imap, _, settings = servers
    channel = EmailChannel(make_runtime(echo_model()), settings, imap_password=imap.password)

    async def main() -> None:
        deliver(imap, message_id="<a1@example.org>", text="first thread")
        deliver(imap, message_id="<b1@example.org>", text="second thread")
        await channel.poll_once()
        # References name the first thread; In-Reply-To (wrongly) the second
        deliver(imap, message_id="<a2@example.org>", text="on the first",
                references="<a1@example.org>", In_Reply_To="<b1@example.org>")
        # a thread overt never saw the start of; one that names an id overt never gave
        deliver(imap, message_id="<c2@example.org>", text="cc'd late",
                references="<c0@example.org> <c1@example.org>")
        deliver(imap, message_id="<d1@example.org>", text="forged",
                In_Reply_To="<overt.00000000000000000000000000000000@overt.example>")
        await channel.poll_once()
    run(main())
    assert sessions(ledger) == ["email:<a1@example.org>", "email:<b1@example.org>",
                                "email:<a1@example.org>", "email:<c0@example.org>",
                                "email:<overt.00000000000000000000000000000000@overt.example>"]


BOB = "bob@example.org"
GUEST = "guest@example.org"


def test_mapped_senders_own_their_sessions_and_a_colleague_in_the_thread_gets_their_own(
        servers: Servers, make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    imap, _, settings = servers
    people = ("agent.ask", "trail.read", "approvals.read")
    gate = Gate(Policy([]), Capabilities({"operator:alice": people, "operator:bob": people,
                                          "operator:guest": people}))
    model = echo_model()
    mapped = dataclasses.replace(
        settings, allowed_senders=(OWNER, BOB, GUEST), default_actor="operator:guest",
        actors=(("Owner@Example.org", "operator:alice"), (BOB, "operator:bob")))
    channel = EmailChannel(make_runtime(model, gate=gate), mapped, imap_password=imap.password)

    async def main() -> None:
        deliver(imap, message_id="<a1@example.org>", text="my salary is private")
        await channel.poll_once()
        deliver(imap, message_id="<a2@example.org>", text="what did she say?",
                sender=f"Bob <{BOB}>", references="<a1@example.org>")
        deliver(imap, message_id="<g1@example.org>", text="hello", sender=GUEST)
        await channel.poll_once()
    run(main())
    assert sessions(ledger) == ["email:<a1@example.org>",
                                "email:<a1@example.org>:operator:bob", "email:<g1@example.org>"]
    owners = [run(session_info(ledger, s)) for s in sessions(ledger)]
    assert [o.owner for o in owners if o is not None] == [
        "operator:alice", "operator:bob", "operator:guest"]
    assert said(model.requests[1]) == [("user", "what did she say?")]  # not Alice's mail


def test_email_actors_are_read_from_overt_toml(tmp_path: Path) -> None:
    config = values(parse('''
[email]
imap_host = "imap.example.org"
imap_user = "agent"
smtp_host = "smtp.example.org"
from_address = "agent@example.org"
actors = { "Alice@Example.org" = "operator:alice" }
default_actor = "mcp_client:mail"
'''))
    email: Any = config["email"]
    assert email.actors == (("alice@example.org", "operator:alice"),)
    assert email.default_actor == "mcp_client:mail"


def test_a_sender_whose_actor_may_not_ask_is_recorded_refused_and_not_answered(
        servers: Servers, make_runtime: RuntimeFactory, ledger: Ledger) -> None:
    imap, sink, settings = servers
    gate = Gate(Policy([]), Capabilities({"operator:viewer": ("trail.read",)}))
    mapped = dataclasses.replace(settings, actors=((OWNER, "operator:viewer"),))
    channel = EmailChannel(make_runtime(echo_model(), gate=gate), mapped,
                           imap_password=imap.password)
    deliver(imap, message_id="<v1@example.org>", text="show me everything")
    assert run(channel.poll_once()) == {"<v1@example.org>": "filtered"}
    assert sink.messages == [] and unseen(imap) == []
    [received] = run(data(ledger, "channel.received"))
    assert received["filtered"] == "sender_not_allowed"
    [refused] = run(data(ledger, "capability.checked"))
    assert (refused["actor"], refused["capability"], refused["subject"]) == (
        "operator:viewer", "agent.ask", "email:<v1@example.org>")
