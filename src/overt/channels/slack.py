"""Slack DMs: an Events API endpoint that answers direct messages in their thread.

What a request goes through (:meth:`SlackDMHandler.handle_request`):

1. Signature: Slack's v0 HMAC-SHA256 of ``v0:{timestamp}:{body}`` under the
   signing secret (``slack_sdk.signature.SignatureVerifier``); a request older
   than five minutes, or with a wrong or missing signature, gets 401.
2. ``url_verification``: the challenge is echoed.
3. ``event_callback``: the event is classified and claimed on the ledger
   (``channel.received``, claim ``slack:{event_id}``) before Slack gets its 200;
   a retried event finds its claim taken and is acknowledged without a second
   answer. Only a ``message`` (or ``file_share``: a message with files, which are
   named to the model, not read) in an ``im`` channel from an allowed user, not
   from a bot, goes to the agent; the others are recorded as filtered, without
   text. An ``event_callback`` without an ``event_id``, or whose message fields
   are not strings, is refused (400) before any claim; a body over 1 MB gets 413.
4. The 200 goes back at once (Slack waits three seconds); the turn runs after,
   in a task, and its reply is posted with ``chat.postMessage`` in the thread,
   then recorded (``channel.replied``).

Sessions (:mod:`overt.channels.threads`): a DM typed in the main pane continues
the session of the same user's previous main-pane DM when that came less than
``dm_session_idle_s`` before it (30 minutes by default), else starts one; a
message in a thread continues the session of the message the thread hangs from.
Each user is the actor ``actors`` maps them to (else ``default_actor``, else the
runtime's operator): their sessions are theirs, and their capabilities apply.

Crash windows: the claim is written before the acknowledgement, so a process
that dies after it and before the reply leaves a ``channel.received`` with no
``channel.replied`` (Slack's retries are deduplicated, so that message is not
answered: at most once, never twice). A ledger that cannot take the claim gets
500, and Slack retries.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from overt.channels.delivery import record_reply
from overt.channels.settings import DM_SESSION_IDLE_S, SLACK_API_BASE_URL, actor_of
from overt.channels.threads import (
    own_session,
    refused_ask,
    slack_main_pane_session,
    slack_thread_session,
)
from overt.errors import ChannelError, ExtraMissingError, LedgerConflict, LedgerError
from overt.events import ChannelFilter, ChannelReceived, ChannelReplyFailed
from overt.policy.actors import Actor
from overt.types import IncomingMessage, text_problem

if TYPE_CHECKING:
    from starlette.routing import Route

    from overt.runtime import Runtime

log = logging.getLogger("overt.channels.slack")

SOURCE: Final = "slack_dm"


MAX_BODY_BYTES: Final = 1_000_000
"""Slack's event payloads are a few kilobytes; a larger body is refused (413) unread."""
ANSWERED_SUBTYPES: Final = frozenset({"file_share"})
"""Message subtypes that carry what a person wrote: a DM with a file attached."""
_TEXT_FIELDS: Final = ("text", "user", "channel", "ts", "thread_ts", "channel_type",
                       "subtype", "event_ts")


def classify(event: Mapping[str, Any], allowed_users: frozenset[str]) -> ChannelFilter | None:
    """Why an Events API ``event`` is not answered, or ``None`` when it is."""
    if event.get("type") != "message":
        return "not_a_message"
    if event.get("bot_id") or event.get("subtype") == "bot_message":
        return "bot_message"  # our own reply comes back as an event: never answer it
    if event.get("subtype") and event.get("subtype") not in ANSWERED_SUBTYPES:
        return "not_a_message"  # edits, deletions, joins
    if event.get("channel_type") != "im":
        return "not_direct_message"
    if str(event.get("user", "")) not in allowed_users:
        return "sender_not_allowed"
    return None


def event_problem(payload: Mapping[str, Any]) -> str:
    """Why an ``event_callback`` cannot be read as Slack sends it, or ``""``.

    Its ``event_id`` is its claim: without one, every such event would share the
    claim ``slack:`` and all but the first be taken for retries. A message field
    that is not a string (``"text": null``) would be read as the text ``None``.
    """
    event_id = payload.get("event_id")
    if not isinstance(event_id, str) or not event_id or text_problem(event_id):
        return "event_callback without an event_id"
    event = payload.get("event")
    if not isinstance(event, dict):
        return "event_callback without an event object"
    if event.get("type") == "message":
        wrong = [k for k in _TEXT_FIELDS if k in event and not isinstance(event[k], str)]
        if wrong:
            return f"message event field {', '.join(wrong)} is not a string"
        if "files" in event and not isinstance(event["files"], list):
            return "message event field files is not a list"
        for key in _TEXT_FIELDS:
            if problem := text_problem(event.get(key, "")):
                return f"message event field {key}: {problem}"
    return ""


def message_text(event: Mapping[str, Any]) -> str:
    """What the person wrote, as they wrote it: Slack sends ``&``, ``<`` and ``>`` as
    ``&amp;``, ``&lt;`` and ``&gt;``, so ``a &lt; b`` is read back as ``a < b``. A file
    sent with the message is named on a line of its own, since its contents are not
    read: the model is told it is there rather than the file being lost unsaid."""
    text = str(event.get("text", ""))
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    files = [f for f in event.get("files", ()) if isinstance(f, dict)]
    notes = [f"[attached file, not read: {_file_name(f)}]" for f in files]
    return "\n".join([text, *notes] if text else notes)


def _file_name(file: Mapping[str, Any]) -> str:
    name = str(file.get("name") or file.get("title") or "unnamed")
    kind = file.get("mimetype")
    return f"{name} ({kind})" if isinstance(kind, str) and kind else name


class SlackDMHandler:
    """Answers Slack DMs with ``runtime``, under its gate, on its record.

    ``client``: a ``slack_sdk.web.async_client.AsyncWebClient`` (built from
    ``bot_token`` and ``api_base_url`` when not given). ``verifier``: a
    ``slack_sdk.signature.SignatureVerifier`` (built from ``signing_secret``).
    ``actors``: Slack user id to actor (``KIND:NAME``); a user not listed is
    ``default_actor`` (``None``: the runtime's operator). ``dm_session_idle_s``: see
    the module docstring.

    Raises:
        ExtraMissingError: slack_sdk (the ``slack`` extra) is not installed.
        UsageError: an actor is not ``KIND:NAME``.
    """

    source = SOURCE

    def __init__(self, runtime: Runtime, *, signing_secret: str, bot_token: str,
                 allowed_users: tuple[str, ...] | list[str],
                 api_base_url: str = SLACK_API_BASE_URL, client: Any = None,
                 verifier: Any = None, actors: Mapping[str, str] | None = None,
                 default_actor: str | None = None,
                 dm_session_idle_s: float = DM_SESSION_IDLE_S) -> None:
        try:
            from slack_sdk.signature import SignatureVerifier
        except ImportError as exc:
            raise ExtraMissingError("slack", "slack_sdk") from exc
        self.runtime = runtime
        self.allowed_users = frozenset(allowed_users)
        self.actors = tuple((user, str(Actor.parse(a))) for user, a in (actors or {}).items())
        self.default_actor = str(Actor.parse(default_actor)) if default_actor else None
        self.dm_session_idle_s = dm_session_idle_s
        self.verifier = verifier or SignatureVerifier(signing_secret)
        if client is None:
            try:
                from slack_sdk.web.async_client import AsyncWebClient
            except ImportError as exc:  # aiohttp, which slack_sdk's async client needs
                raise ExtraMissingError("slack", "aiohttp") from exc
            client = AsyncWebClient(token=bot_token, base_url=api_base_url)
        self.client = client
        self._tasks: set[asyncio.Task[None]] = set()

    # -- the endpoint ---------------------------------------------------------

    async def handle_request(self, body: bytes,
                             headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """Answer one Events API request: (HTTP status, JSON body).

        The turn a new DM starts runs in a task after this returns; :meth:`drain`
        waits for such tasks.
        """
        if len(body) > MAX_BODY_BYTES:
            return 413, {"ok": False, "error": "too_large"}
        try:
            valid = self.verifier.is_valid_request(body, dict(headers))
        except ValueError:  # a timestamp that is not a number of seconds
            valid = False
        if not valid:
            return 401, {"ok": False, "error": "invalid_signature"}
        try:
            payload = json.loads(body)
        except ValueError:
            return 400, {"ok": False, "error": "invalid_json"}
        if not isinstance(payload, dict):
            return 400, {"ok": False, "error": "invalid_payload"}
        if payload.get("type") == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str) or not challenge:
                return 400, {"ok": False, "error": "invalid_challenge"}
            return 200, {"challenge": challenge}
        if payload.get("type") != "event_callback":
            return 200, {"ok": True}  # app_rate_limited and the like: nothing to answer
        if problem := event_problem(payload):
            log.error("Slack event refused: %s", problem)
            return 400, {"ok": False, "error": "invalid_event", "detail": problem}
        try:
            message = await self.receive(payload)
        except LedgerConflict:
            return 200, {"ok": True, "duplicate": True}  # a retry: answered once already
        except LedgerError as exc:
            log.error("Slack event %s not claimed: %s", payload.get("event_id"), exc)
            return 500, {"ok": False, "error": "ledger_unavailable"}  # Slack will retry
        if message is not None:
            task = asyncio.create_task(self.answer(message))
            self._tasks.add(task)
            task.add_done_callback(self._done)
        return 200, {"ok": True}

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # the turn's own failure is on the ledger (the engine records it); this
            # is what escaped it, e.g. a ledger that stopped answering
            log.error("Slack DM turn failed: %s: %s", type(exc).__name__, exc)

    async def receive(self, payload: Mapping[str, Any]) -> IncomingMessage | None:
        """Claim and classify an ``event_callback``; the message to answer, if any.

        Raises:
            LedgerConflict: the event was received before (a retry).
            LedgerError: the claim could not be recorded.
        """
        event: Mapping[str, Any] = payload["event"]
        event_id = str(payload.get("event_id", ""))
        channel, ts = str(event.get("channel", "")), str(event.get("ts", ""))
        thread_ts = str(event.get("thread_ts") or ts)
        metadata = {"channel_id": channel, "event_ts": str(event.get("event_ts") or ts),
                    "event_id": event_id, "user_id": str(event.get("user", "")),
                    "ts": ts, "thread_ts": thread_ts}
        filtered = classify(event, self.allowed_users)
        session, actor = _session(channel, thread_ts), self.actor_for(metadata["user_id"])
        refused = None
        if filtered is None:
            refused = refused_ask(self.runtime.gate.capabilities, actor, f"slack:{event_id}")
            filtered = "sender_not_allowed" if refused is not None else None
        if filtered is None:
            session = await self.session_for(channel, ts, thread_ts, metadata["user_id"],
                                             actor)
        message = IncomingMessage(SOURCE, message_text(event),
                                  metadata | {"session_id": session, "actor": str(actor)})
        await self.runtime.ledger.record([ChannelReceived(
            session_id=session, claim=f"slack:{event_id}", source=SOURCE,
            caller_session_id=message.caller_session_id, sender=metadata["user_id"],
            channel_ids={k: v for k, v in metadata.items() if v}, filtered=filtered),
            *([refused] if refused is not None else [])])
        return message if filtered is None else None

    def actor_for(self, user: str) -> Actor:
        """Who Slack user ``user`` is on the record."""
        named = actor_of(self.actors, self.default_actor, user)
        return Actor.parse(named) if named else self.runtime.operator

    async def session_for(self, channel: str, ts: str, thread_ts: str, user: str,
                          actor: Actor) -> str:
        """The session a message continues or starts (see the module docstring).

        Raises:
            LedgerError: the ledger could not be read.
        """
        ledger = self.runtime.ledger
        if thread_ts != ts:  # in a thread: the session of the message it hangs from
            found = await slack_thread_session(ledger, channel=channel, thread_ts=thread_ts)
        else:  # the main pane: the conversation typed there, until a pause
            found = await slack_main_pane_session(ledger, channel=channel, user=user, ts=ts,
                                                  idle_s=self.dm_session_idle_s)
        return await own_session(ledger, self.runtime.gate.capabilities,
                                 found or _session(channel, thread_ts), actor)

    async def answer(self, message: IncomingMessage) -> None:
        """Run the turn for ``message`` and post its reply in the thread; a reply
        that cannot be posted is recorded (``channel.reply_failed``) and logged."""
        meta = message.metadata
        target = {"channel": str(meta["channel_id"]), "thread_ts": str(meta["thread_ts"])}
        session = str(meta.get("session_id") or _session(target["channel"],
                                                         target["thread_ts"]))
        actor = Actor.parse(str(meta["actor"])) if meta.get("actor") else None
        result = await self.runtime.respond(
            message, session_id=session, actor=actor,
            channel_ids=target | {"event_id": str(meta["event_id"])})
        try:
            reply_ids = await self.send_reply(target, result.text)
        except ChannelError as exc:
            log.error("reply to Slack event %s not posted: %s", meta["event_id"], exc)
            return
        await record_reply(self.runtime.ledger, result, claim=f"slack:{meta['event_id']}",
                           source=SOURCE, target=target, reply_ids=reply_ids)

    async def send_reply(self, target: Mapping[str, str], text: str, *,
                         key: str = "") -> dict[str, str]:
        """Post ``text`` in ``target``'s thread with ``chat.postMessage``; the posted ts.

        Raises:
            ChannelError: Slack refused the message or could not be reached (recorded).
        """
        from slack_sdk.errors import SlackApiError, SlackClientError

        try:
            response = await self.client.chat_postMessage(
                channel=target["channel"], text=text, thread_ts=target["thread_ts"])
        except (TimeoutError, SlackClientError, OSError) as exc:
            code = None
            if isinstance(exc, SlackApiError):
                code = str(exc.response.get("error", "")) or None
            await self.runtime.ledger.record([ChannelReplyFailed(
                source=SOURCE, target=dict(target), error_type=type(exc).__name__,
                error_code=code, reply_claim=key or None)])
            raise ChannelError(f"chat.postMessage failed: {type(exc).__name__}"
                               f"{f' ({code})' if code else ''}") from exc
        return {"channel": str(response.get("channel", target["channel"])),
                "ts": str(response.get("ts", ""))}

    async def drain(self) -> None:
        """Wait for every turn started by a request to finish (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _session(channel: str, thread_ts: str) -> str:
    """The session a message starts: named by its thread's root ``ts`` (its own, for a
    message in the main pane)."""
    return f"slack:{channel}:{thread_ts}"


def slack_routes(handler: SlackDMHandler, path: str = "/slack/events") -> list[Route]:
    """The Starlette route of the Events API endpoint, to mount in an app.

    Raises:
        ExtraMissingError: starlette is not installed.
    """
    try:
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ExtraMissingError("slack", "starlette") from exc

    async def events(request: Request) -> JSONResponse:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return JSONResponse({"ok": False, "error": "too_large"}, status_code=413)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:  # chunked, or a Content-Length that lied
                return JSONResponse({"ok": False, "error": "too_large"}, status_code=413)
            chunks.append(chunk)
        status, body = await handler.handle_request(b"".join(chunks), request.headers)
        return JSONResponse(body, status_code=status)

    return [Route(path, events, methods=["POST"])]
