"""Replies that leave a channel, and the record that says where they went.

Every channel records a ``channel.replied`` entry when a reply is delivered,
with the *target* (where the message came from: Slack channel and thread,
email Message-ID and References). A turn that paused on an approval is
answered twice: first "this awaits approval" (the entry carries
``awaiting_approval``), later the resumed answer, delivered by
:func:`deliver_resumed` to the target on record. That works from any process
(the operator may approve from the CLI on another machine) and once: the
resumed reply's claim is ``{first claim}:resumed:{request id}``, and each attempt
to send it is claimed (``channel.reply_started``) before the channel sees it, so
processes sweeping at once send it once. A refused attempt
(``channel.reply_failed``) is tried again by the next sweep; a process that stops
between its attempt's claim and the record of the reply leaves it unsent rather
than risk sending it twice.

A process that holds a channel (``overt serve`` with Slack or email, ``overt
email poll``) also looks for owed answers every :data:`DELIVER_EVERY_S` seconds
while it runs (:func:`delivering`), so an answer whose approval was decided by a
process without the channel's secrets (``overt approvals approve`` on a laptop,
in CI) leaves within seconds rather than at that channel's next event or poll.
A look that finds nothing owed is one read of an index of the paused replies not
yet followed by their answer; each such reply then costs one claim lookup.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from overt.channels.repeating import repeating
from overt.engine.resume import Resumed
from overt.errors import ChannelError, LedgerConflict, LedgerUnavailable, OvertError
from overt.events import ChannelReplied, ChannelReplyStarted, TurnCompleted, TurnResumed
from overt.ledger.base import Ledger
from overt.types import ResponseResult, Usage

if TYPE_CHECKING:
    from overt.runtime import Runtime

log = logging.getLogger("overt.channels.delivery")

DELIVER_EVERY_S = 2.0
"""How often a process holding a channel looks for answers it owes."""


class Replier(Protocol):
    """Sends a reply to a target on one channel; returns the ids the channel gave it."""

    source: str

    async def send_reply(self, target: Mapping[str, str], text: str, *,
                         key: str = "") -> dict[str, str]:
        """Deliver ``text`` to ``target``. ``key`` names this reply (its claim): a
        channel that can make a resend recognisable (email's Message-ID) derives it
        from the key.

        Raises:
            ChannelError: the channel refused or did not answer (recorded as
                ``channel.reply_failed`` with ``reply_claim=key``, so a later sweep
                tries a resumed answer again).
        """
        ...


async def record_reply(ledger: Ledger, result: ResponseResult, *, claim: str, source: str,
                       target: Mapping[str, str], reply_ids: Mapping[str, str],
                       resumed_from: str | None = None,
                       contents: Mapping[str, str] | None = None) -> None:
    """Record that ``result`` was delivered to ``target`` (``contents``: bodies the
    target refers to by digest, for the content tier).

    Raises:
        LedgerConflict: a reply under ``claim`` is already on the record.
    """
    await ledger.record([ChannelReplied(
        turn_id=result.turn_id, session_id=result.session_id, claim=claim, source=source,
        target=dict(target), reply_ids=dict(reply_ids),
        awaiting_approval=result.awaiting_approval, resumed_from=resumed_from)], contents)


async def paused_reply(ledger: Ledger, request_id: str,
                       turn_id: str | None) -> ChannelReplied | None:
    """The reply that told the sender the turn awaits ``request_id``."""
    if turn_id is None:
        return None
    for entry in await ledger.entries(turn_id=turn_id, kinds=[ChannelReplied.kind]):
        reply = entry.event(ChannelReplied)
        if reply.awaiting_approval == request_id:
            return reply
    return None


async def deliver_resumed(resumed: Resumed, ledger: Ledger,
                          repliers: Mapping[str, Replier]) -> dict[str, str] | None:
    """Deliver the answer of a turn resumed after an approval to where its message
    came from; the reply ids, or ``None`` when there is nothing to deliver (no answer,
    the turn did not come from a channel here, or it was delivered already).

    ``repliers`` maps a source (``slack_dm``, ``email``) to its channel.

    Raises:
        ChannelError: the channel refused the reply (recorded by the replier).
    """
    result, request = resumed.result, resumed.request
    if result is None:
        return None
    first = await paused_reply(ledger, request.request_id, request.turn_id)
    if first is None:
        return None
    source = first.source
    replier = repliers.get(source)
    if replier is None:
        return None
    claim = f"{first.claim}:resumed:{request.request_id}"
    if await ledger.claimed(ChannelReplied.kind, claim) is not None:
        return None
    target = {str(k): str(v) for k, v in first.target.items()}
    failed = await ledger.reply_failures(claim)  # this reply's (an index of them alone)
    try:  # the attempt is claimed before the channel sees anything: one sender
        await ledger.record([ChannelReplyStarted(
            turn_id=result.turn_id, session_id=result.session_id,
            claim=f"{claim}#{failed + 1}", reply_claim=claim, source=source)])
    except LedgerConflict:
        return None  # another process (or task) is sending it, or has sent it
    reply_ids = await replier.send_reply(target, result.text, key=claim)
    await record_reply(ledger, result, claim=claim, source=source, target=target,
                       reply_ids=reply_ids, resumed_from=request.request_id)
    return reply_ids


async def deliver_pending(runtime: Runtime,
                          repliers: Mapping[str, Replier]) -> list[dict[str, str]]:
    """Deliver every resumed answer a channel here still owes, whichever process
    decided and resumed the turn (an operator approving from the CLI, the HTTP
    API, MCP). Safe to run in every process at once: each delivery is claimed.

    Raises:
        ChannelError: a channel refused a reply (recorded by the replier); the
            others before it were delivered.
    """
    ledger = runtime.ledger
    delivered: list[dict[str, str]] = []
    # the paused replies whose resumed answer is not on the record (an index of paused
    # replies, each looked up by its resumed claim), not every reply ever sent
    for entry in await ledger.unresumed_replies():
        first = entry.event(ChannelReplied)
        request_id = first.awaiting_approval
        if not request_id or first.source not in repliers:
            continue  # not ours to deliver
        if await ledger.claimed(TurnResumed.kind, request_id) is None:
            continue  # not taken up (yet): nothing to deliver
        request = await runtime.approvals.get(request_id)
        completed = await ledger.entries(turn_id=first.turn_id, kinds=[TurnCompleted.kind])
        if not completed:
            continue
        seq, end = completed[-1].seq, completed[-1].event(TurnCompleted)
        text = (await ledger.content(end.reply_digest, seq=seq) if end.reply_digest else "") or ""
        result = ResponseResult(text, end.tools_used,
                                Usage(end.input_tokens, end.output_tokens, end.cost_usd),
                                None, end.session_id or "", end.turn_id or "")
        ids = await deliver_resumed(Resumed(request, result=result), ledger, repliers)
        if ids is not None:
            delivered.append(ids)
    return delivered



async def deliver_owed(runtime: Runtime, repliers: Mapping[str, Replier]) -> int:
    """One look for owed answers (:func:`deliver_pending`): how many were delivered.
    A channel that refused, or a ledger out of reach, is logged and tried again at
    the next look."""
    try:
        delivered = await deliver_pending(runtime, repliers)
    except ChannelError as exc:  # recorded by the replier; the next look tries again
        log.warning("an answer owed after an approval was not delivered: %s", exc)
        return 0
    except LedgerUnavailable as exc:
        log.info("answers owed after an approval not looked for: %s", exc)
        return 0
    except OvertError as exc:  # one bad entry must not stop the later looks
        log.warning("looking for answers owed after an approval failed: %s: %s",
                    type(exc).__name__, exc)
        return 0
    if delivered:
        log.info("delivered %d answer(s) owed after an approval", len(delivered))
    return len(delivered)


def delivering(runtime: Runtime, repliers: Mapping[str, Replier], *,
               every_s: float | None = DELIVER_EVERY_S) -> AbstractAsyncContextManager[None]:
    """While the block runs, :func:`deliver_owed` every ``every_s`` seconds (``None``,
    or no channel in ``repliers``: never)."""
    return repeating(lambda: deliver_owed(runtime, repliers), every_s if repliers else None,
                     "overt-deliver-owed")


def with_delivery(runtime: Runtime, repliers: Mapping[str, Replier],
                  inner: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
                  *, every_s: float | None = DELIVER_EVERY_S,
                  ) -> Callable[[], AbstractAsyncContextManager[None]]:
    """A lifespan (for :func:`overt.channels.http.create_app`) that runs
    :func:`delivering` while the server is up, around ``inner`` if given."""

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with delivering(runtime, repliers, every_s=every_s):
            if inner is not None:
                async with inner():
                    yield
            else:
                yield

    return lifespan
