"""Email: poll an IMAP mailbox, answer allowed senders by SMTP in the same thread.

One message goes through :meth:`EmailChannel.poll_once` in this order; the
ledger's once-only claims (``email:{Message-ID}``) make each step safe to redo:

1. fetched unread with ``BODY.PEEK[]`` (reading it does not mark it ``\\Seen``);
2. a message whose ``channel.replied`` is on record is only marked ``\\Seen``;
3. ``channel.received`` recorded (sender and Message-ID, never the text), with
   ``filtered`` set for a sender not allowed or an automatic message (an
   autoreply, a bounce, a list's, our own: :func:`is_automatic`), which is then
   marked ``\\Seen`` and left unanswered;
4. the turn runs; the reply is sent by SMTP with ``In-Reply-To`` and
   ``References`` (so it threads) and a Message-ID derived from the claim;
5. ``channel.replied`` recorded; 6. the message marked ``\\Seen``.

Crash windows (a process dies, or the server drops, between two steps):

- after 3, before 4's send: the next poll finds it unread and not replied, and
  answers it (a second turn on the record, one reply sent);
- after 4's send, before 5: the next poll sends the reply again. It carries the
  same Message-ID, so the recipient's mail client and most servers show it once;
  this window is one SMTP round trip;
- after 5, before 6: the next poll sees the reply on record and only marks it.

A reply SMTP refuses is recorded (``channel.reply_failed``) and the message left
unread, so the next poll tries again. Run one poller per mailbox: two pollers
could both answer a message in window 3-5.

Threads (:mod:`overt.channels.threads`): a mail continues the session of the first
message its ``References`` name, else the one its ``In-Reply-To`` names, that overt
received or sent (a reply to overt's own answer, with ``In-Reply-To`` alone, as
many clients and scripts write it, continues the conversation); else the thread's
first id names a new session. Each sender is the actor ``actors`` maps them to
(else ``default_actor``, else the runtime's operator): their sessions are theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.policy
import hashlib
import imaplib
import logging
import smtplib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from email.errors import MessageError
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesParser
from email.utils import make_msgid, parseaddr
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, Final, Literal

from overt.channels.delivery import record_reply
from overt.channels.settings import EmailSettings, actor_of
from overt.channels.threads import email_session, own_session, refused_ask
from overt.errors import ChannelError, LedgerConflict
from overt.events import ChannelFilter, ChannelReceived, ChannelReplied, ChannelReplyFailed
from overt.ledger.canonical import digest_text
from overt.policy.actors import Actor
from overt.types import IncomingMessage

if TYPE_CHECKING:
    from overt.runtime import Runtime

log = logging.getLogger("overt.channels.email")

SOURCE: Final = "email"

Outcome = Literal["answered", "filtered", "already_replied", "reply_failed"]


@dataclass(frozen=True, slots=True)
class InboundMail:
    """What overt reads of one message."""

    uid: str
    message_id: str
    sender: str
    subject: str
    references: str
    text: str
    automatic: bool
    in_reply_to: str = ""

    @property
    def claim(self) -> str:
        return f"email:{self.message_id}"


def parse_mail(uid: str, raw: bytes) -> InboundMail:
    """Read a raw RFC 5322 message. A message without a Message-ID gets one overt makes
    from its bytes (:func:`made_message_id`), so it is still claimed once.

    Whatever the sender's software wrote, this returns: a header the parser cannot
    read is taken as its raw text, a body in a charset Python does not know is read
    as UTF-8 (undecodable bytes replaced), an HTML-only body is read as its text, a
    mail with no body text is read as its subject, and each attachment is named on a
    line of its own (its contents are not read), so one odd message neither stops
    the poll nor reaches the model as an empty one.
    """
    msg = BytesParser(policy=email.policy.default).parsebytes(raw)
    message_id = _header(msg, "Message-ID").strip() or made_message_id(raw)
    # From, not Reply-To: a stranger could name an allowed address as Reply-To
    sender = parseaddr(_header(msg, "From"))[1].lower()
    subject = _header(msg, "Subject")
    return InboundMail(uid=uid, message_id=message_id, sender=sender,
                       subject=subject, text=_text(msg, subject),
                       references=" ".join(_header(msg, "References").split()),
                       in_reply_to=(_header(msg, "In-Reply-To").split() or [""])[0],
                       automatic=is_automatic(msg))


AUTOMATIC_PRECEDENCE: Final = frozenset({"bulk", "junk", "list", "auto_reply"})


def is_automatic(msg: Message) -> bool:
    """Whether a program, not a person, sent ``msg`` (RFC 3834 and what autoresponders
    write in practice): answering it could start a loop between two robots.

    ``Auto-Submitted`` other than ``no``; a mailing list (``List-Id``); ``Precedence``
    bulk, junk, list or auto_reply; ``X-Autoreply`` / ``X-Autorespond`` (vacation
    programs that predate RFC 3834); a delivery report (``multipart/report``, a bounce)
    or a null ``Return-Path`` (``<>``, which bounces are sent with).
    """
    if _header(msg, "Auto-Submitted", "no").split(";")[0].strip().lower() != "no":
        return True
    if _header(msg, "Precedence").strip().lower() in AUTOMATIC_PRECEDENCE:
        return True
    if any(_header(msg, name) for name in ("List-Id", "X-Autoreply", "X-Autorespond")):
        return True
    return msg.get_content_type() == "multipart/report" or \
        _header(msg, "Return-Path").strip() == "<>"


def _header(msg: Message, name: str, default: str = "") -> str:
    """``name``'s value; as written, unfolded, when the parser cannot read it (a
    Message-ID of ``<<<@@@`` makes it raise IndexError)."""
    try:
        value = msg.get(name)
        return default if value is None else str(value)
    except (IndexError, ValueError, LookupError, TypeError, AttributeError,
            MessageError) as exc:
        log.warning("header %s read as written: %s: %s", name, type(exc).__name__, exc)
    raw = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    return default if raw is None else " ".join(str(raw).split())


def _text(msg: Message, subject: str) -> str:
    """The body a person reads: the plain part, else the HTML part as text, else (a
    mail written all in its subject line) the subject; then a line for each
    attachment, named, saying it was not read."""
    body = msg.get_body(preferencelist=("plain", "html")) \
        if isinstance(msg, EmailMessage) else None
    text = "" if body is None else _part_text(body)
    if body is not None and body.get_content_type() == "text/html":
        text = html_text(text)
    notes = []
    if isinstance(msg, EmailMessage):
        for part in msg.iter_attachments():
            name = part.get_filename() or "unnamed"
            notes.append(f"[attachment, not read: {name} ({part.get_content_type()})]")
    return "\n".join(x for x in (text.strip() or subject.strip(), *notes) if x)


def _part_text(part: MIMEPart) -> str:
    """A text part's text. One that names no charset is US-ASCII by RFC 2045, but
    a script's 8-bit mail is UTF-8 more often than not: bytes that are valid UTF-8
    are read as such (``café``, not ``caf��``)."""
    if part.get_content_charset() is None:
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes) and not payload.isascii():
            text = payload.decode("utf-8", errors="replace")
            if "\ufffd" not in text:  # else not UTF-8 either: read as declared, below
                return text
    try:
        return str(part.get_content())
    except LookupError as exc:  # a charset Python does not know
        log.warning("mail body charset %s read as UTF-8: %s", part.get_content_charset(), exc)
    payload = part.get_payload(decode=True)
    return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""


class _HtmlText(HTMLParser):
    SKIPPED = frozenset({"script", "style", "head", "title"})
    BREAKS = frozenset({"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIPPED:
            self.skipping += 1
        elif tag in self.BREAKS:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BREAKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.out.append(data)


def html_text(html: str) -> str:
    """The text of an HTML body, as a mail client would show it (no markup, one line
    per paragraph or break, entities decoded)."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.out).splitlines())
    return "\n".join(line for line in lines if line)


def made_message_id(raw: bytes) -> str:
    """The key of a message that came without a Message-ID: a digest of the message
    as the server stores it.

    Not the IMAP UID: a server hands out the same UIDs again when a mailbox is
    recreated (a new UIDVALIDITY), so a UID key would take a later message for
    one already answered, and thread it into that message's session. Nor a fresh
    random id: the message is read again at every poll until it is marked seen,
    and its claim must be the same each time so it is answered once. (128 bits of
    digest; short enough that ``In-Reply-To`` is not folded.)
    """
    return f"<{hashlib.sha256(raw).hexdigest()[:32]}.nomsgid@overt.invalid>"


def thread_key(mail: InboundMail) -> str:
    """The session ``mail``'s thread starts when overt knows none of its messages: the
    first message of its ``References``, else the one it is ``In-Reply-To``, else
    itself (it starts a thread)."""
    return f"email:{(mail.references.split() or [mail.in_reply_to or mail.message_id])[0]}"


def reply_message(*, to: str, from_address: str, subject: str, in_reply_to: str,
                  references: str, text: str, message_id: str) -> EmailMessage:
    """A reply that threads: ``In-Reply-To`` the original, ``References`` its chain."""
    msg = EmailMessage()
    msg["From"] = from_address
    msg["To"] = to
    msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    msg["Message-ID"] = message_id
    msg["In-Reply-To"] = in_reply_to
    msg["References"] = f"{references} {in_reply_to}".strip()
    msg["Auto-Submitted"] = "auto-replied"  # RFC 3834: other robots do not answer it
    msg.set_content(text)
    return msg


def reply_id(claim: str, from_address: str) -> str:
    """The reply's Message-ID: the same for a resend, so it is shown once."""
    domain = from_address.rpartition("@")[2] or "overt.invalid"
    return f"<overt.{hashlib.sha256(claim.encode()).hexdigest()[:32]}@{domain}>"


class Mailbox:
    """The IMAP side, through :mod:`imaplib` (blocking; called in a thread)."""

    def __init__(self, settings: EmailSettings, password: str) -> None:
        self.settings = settings
        self._password = password

    @contextmanager
    def _session(self) -> Iterator[imaplib.IMAP4]:
        s = self.settings
        try:
            conn = (imaplib.IMAP4_SSL(s.imap_host, s.imap_port, timeout=30) if s.imap_ssl
                    else imaplib.IMAP4(s.imap_host, s.imap_port, timeout=30))
            conn.login(s.imap_user, self._password)
            _ok(conn.select(_quote(s.mailbox)), "SELECT")
        except (OSError, imaplib.IMAP4.error) as exc:
            raise ChannelError(f"IMAP {s.imap_host}:{s.imap_port}: {exc}") from exc
        try:
            yield conn
        except (OSError, imaplib.IMAP4.error) as exc:
            raise ChannelError(f"IMAP {s.imap_host}:{s.imap_port}: {exc}") from exc
        finally:
            try:
                conn.logout()
            except (OSError, imaplib.IMAP4.error) as exc:
                log.info("IMAP logout: %s", exc)  # the work is done; the server hung up

    def unseen(self) -> list[tuple[str, bytes]]:
        """(UID, raw message) of every unread message, oldest first, left unread.

        Raises:
            ChannelError: the server refused or could not be reached.
        """
        with self._session() as conn:
            found = _ok(conn.uid("SEARCH", "UNSEEN"), "SEARCH")
            uids = found[0].decode().split() if found and isinstance(found[0], bytes) else []
            out = []
            for uid in uids:
                data = _ok(conn.uid("FETCH", uid, "(BODY.PEEK[])"), "FETCH")
                raw = next((part[1] for part in data if isinstance(part, tuple)), None)
                if raw is not None:
                    out.append((uid, raw))
            return out

    def mark_seen(self, uid: str) -> None:
        """Flag ``uid`` ``\\Seen``: handled.

        Raises:
            ChannelError: the server refused or could not be reached.
        """
        with self._session() as conn:
            _ok(conn.uid("STORE", uid, "+FLAGS", "(\\Seen)"), "STORE")


def _ok(answer: tuple[str, Sequence[Any]], command: str) -> Sequence[Any]:
    status, data = answer
    if status != "OK":
        raise imaplib.IMAP4.error(f"{command} answered {status}: {data!r}")
    return data


def _quote(mailbox: str) -> str:
    return '"' + mailbox.replace("\\", "\\\\").replace('"', '\\"') + '"'


class EmailChannel:
    """Answers mail from ``settings.allowed_senders`` with ``runtime``, on its record.

    Also a replier for :func:`overt.channels.delivery.deliver_resumed`: an answer
    that waited for an approval is sent in the same thread.
    """

    source = SOURCE

    def __init__(self, runtime: Runtime, settings: EmailSettings, *, imap_password: str,
                 smtp_password: str | None = None) -> None:
        self.runtime = runtime
        self.settings = settings
        self.mailbox = Mailbox(settings, imap_password)
        self._smtp_password = smtp_password
        self.allowed = frozenset(a.lower() for a in settings.allowed_senders)
        self.actors = tuple((address.lower(), str(Actor.parse(actor)))
                            for address, actor in settings.actors)
        self.default_actor = str(Actor.parse(settings.default_actor)) \
            if settings.default_actor else None

    async def poll_once(self) -> dict[str, Outcome]:
        """Handle every unread message once; what became of each, by Message-ID.

        Raises:
            ChannelError: the IMAP server refused or could not be reached.
        """
        outcomes: dict[str, Outcome] = {}
        for uid, raw in await asyncio.to_thread(self.mailbox.unseen):
            mail = parse_mail(uid, raw)
            outcomes[mail.message_id] = await self.handle(mail)
        return outcomes

    async def handle(self, mail: InboundMail) -> Outcome:
        """Steps 2-6 of the module docstring for one message.

        Raises:
            ChannelError: the message could not be marked handled.
        """
        ledger = self.runtime.ledger
        if await ledger.claimed(ChannelReplied.kind, mail.claim) is not None:
            await asyncio.to_thread(self.mailbox.mark_seen, mail.uid)
            return "already_replied"
        filtered = self._filter(mail)
        message = IncomingMessage(SOURCE, mail.text, {"message_id": mail.message_id,
                                                      "sender": mail.sender})
        actor = self.actor_for(mail.sender)
        refused = None
        if filtered is None:
            refused = refused_ask(self.runtime.gate.capabilities, actor, mail.claim)
            filtered = "sender_not_allowed" if refused is not None else None
        session = await self.session_for(mail, actor) if filtered is None \
            else thread_key(mail)
        # a conflict: received before a crash, not replied to; answer it now (window 3-4)
        with contextlib.suppress(LedgerConflict):
            await ledger.record([ChannelReceived(
                session_id=session, claim=mail.claim, source=SOURCE,
                caller_session_id=message.caller_session_id, sender=mail.sender,
                channel_ids={"message_id": mail.message_id, "uid": mail.uid},
                filtered=filtered), *([refused] if refused is not None else [])])
        if filtered is not None:
            await asyncio.to_thread(self.mailbox.mark_seen, mail.uid)
            return "filtered"
        result = await self.runtime.respond(message, session_id=session, actor=actor,
                                            channel_ids={"message_id": mail.message_id})
        subject_digest = digest_text(mail.subject)
        target = {"message_id": mail.message_id, "references": mail.references,
                  "to": mail.sender, "subject_digest": subject_digest, "claim": mail.claim}
        try:
            reply_ids = await self._send(target, mail.subject, result.text, mail.claim)
        except ChannelError as exc:
            log.error("reply to %s not sent: %s", mail.message_id, exc)
            return "reply_failed"
        await record_reply(ledger, result, claim=mail.claim, source=SOURCE, target=target,
                           reply_ids=reply_ids, contents={subject_digest: mail.subject})
        await asyncio.to_thread(self.mailbox.mark_seen, mail.uid)
        return "answered"

    def actor_for(self, sender: str) -> Actor:
        """Who ``sender`` (an address) is on the record."""
        named = actor_of(self.actors, self.default_actor, sender.lower())
        return Actor.parse(named) if named else self.runtime.operator

    async def session_for(self, mail: InboundMail, actor: Actor) -> str:
        """The session ``mail`` continues or starts (see the module docstring); a mail
        received before (a crash before its reply) keeps the session it was given.

        Raises:
            LedgerError: the ledger could not be read.
        """
        ledger = self.runtime.ledger
        before = await ledger.claimed(ChannelReceived.kind, mail.claim)
        if before is not None and before.session_id:
            return str(before.session_id)
        domain = self.settings.from_address.rpartition("@")[2] or "overt.invalid"
        found = await email_session(ledger, mail.references.split(), mail.in_reply_to,
                                    domain)
        return await own_session(ledger, self.runtime.gate.capabilities,
                                 found or thread_key(mail), actor)

    def _filter(self, mail: InboundMail) -> ChannelFilter | None:
        if mail.automatic or mail.sender == self.settings.from_address.lower():
            return "bot_message"  # a robot's, or our own: answering could loop
        if mail.sender not in self.allowed:
            return "sender_not_allowed"
        return None

    async def send_reply(self, target: Mapping[str, str], text: str, *,
                         key: str = "") -> dict[str, str]:
        """Send ``text`` as a reply in ``target``'s thread (a resumed turn's answer);
        ``key`` (the reply's claim) gives it its Message-ID.

        Raises:
            ChannelError: SMTP refused it (recorded).
        """
        subject = await self.runtime.ledger.content(target["subject_digest"]) or ""
        return await self._send(target, subject, text, key or make_msgid())

    async def _send(self, target: Mapping[str, str], subject: str, text: str,
                    claim: str) -> dict[str, str]:
        message_id = reply_id(claim, self.settings.from_address)
        msg = reply_message(to=target["to"], from_address=self.settings.from_address,
                            subject=subject, in_reply_to=target["message_id"],
                            references=target["references"], text=text,
                            message_id=message_id)
        try:
            await asyncio.to_thread(self._smtp_send, msg)
        except (OSError, smtplib.SMTPException) as exc:
            await self.runtime.ledger.record([ChannelReplyFailed(
                source=SOURCE, target={"message_id": target["message_id"]},
                error_type=type(exc).__name__, reply_claim=claim)])
            raise ChannelError(f"SMTP {self.settings.smtp_host}:{self.settings.smtp_port}: "
                               f"{type(exc).__name__}: {exc}") from exc
        return {"message_id": message_id}

    def _smtp_send(self, msg: EmailMessage) -> None:
        s = self.settings
        with smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=30) as smtp:
            if s.smtp_starttls:
                smtp.starttls()
            if s.smtp_user:
                smtp.login(s.smtp_user, self._smtp_password or "")
            smtp.send_message(msg)
