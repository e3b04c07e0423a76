"""Which session a Slack DM or an email continues, read back from the ledger.

Nothing is kept beside the record: every worker of one deployment finds the same
session for the same message, whichever received the earlier ones.

- **Email** (RFC 5322 threading): the ids of ``References``, else the one of
  ``In-Reply-To``, each resolved through overt's own record: a message overt
  received belongs to the session its ``channel.received`` names, a reply overt
  sent (``<overt.…@…>``) to the session its ``channel.replied`` names. The first
  id that resolves wins; none does: the thread's first id names a new session.
- **Slack**: a message typed in a DM's main pane continues the session of the same
  user's previous main-pane message in that DM, when that was less than
  ``dm_session_idle_s`` before it (by Slack's own ``ts``); a message in a thread
  continues the session of the message the thread hangs from.
- **Who**: a session belongs to its first turn's actor. A person mapped to another
  actor who writes into it (a colleague answering in an email thread) gets a
  session of their own in that thread, unless they may read any session. A person
  whose actor lacks ``agent.ask`` (what ``POST /v1/messages`` needs) is not
  answered: the message is recorded as filtered (``sender_not_allowed``) beside the
  refused ``capability.checked``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from overt.clock import iso_after, to_iso
from overt.events import CapabilityChecked
from overt.ledger.reads import threads
from overt.ledger.reads.base import readable
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.sessions.access import may_reach
from overt.sessions.book import session_info

SLACK_DELIVERY_S = 600.0
"""How long after a Slack message's ``ts`` its event may reach overt (Slack retries
for about five minutes): the window a thread's root is looked for in."""


async def email_session(ledger: Any, references: Sequence[str], in_reply_to: str,
                        own_domain: str) -> str | None:
    """The session the mail that names ``references`` (else ``in_reply_to``) continues,
    or ``None`` when none of them is a message overt received or sent."""
    ids = list(references) or ([in_reply_to] if in_reply_to else [])
    lookups = readable(ledger)  # a ledger with no plain reads: only what it claimed
    for message_id in ids:
        found = await ledger.claimed("channel.received", f"email:{message_id}")
        if found is not None and found.session_id:
            return str(found.session_id)
        if lookups and message_id.startswith("<overt.") and \
                message_id.rstrip(">").endswith(f"@{own_domain}"):
            session = await threads.email_reply_session(ledger, message_id)
            if session is not None:
                return session
    return None


async def slack_main_pane_session(ledger: Any, *, channel: str, user: str, ts: str,
                                  idle_s: float) -> str | None:
    """The session of ``user``'s previous main-pane message in DM ``channel``, when it
    was sent less than ``idle_s`` before ``ts``; else ``None``."""
    if not readable(ledger) or idle_s <= 0:  # a ledger with no plain reads: none found
        return None
    last = await threads.slack_last_main_pane(
        ledger, channel=channel, user=user, since=iso_after(-(idle_s + SLACK_DELIVERY_S)))
    if last is None or not last.session_id or last.ts is None:
        return None
    try:
        gap = float(ts) - float(last.ts)
    except (TypeError, ValueError):  # a ts Slack did not write: no conversation to join
        return None
    return str(last.session_id) if 0 <= gap < idle_s else None


async def slack_thread_session(ledger: Any, *, channel: str, thread_ts: str) -> str | None:
    """The session of the message a thread hangs from (``thread_ts``), if overt
    received it; else ``None``."""
    try:
        sent = datetime.fromtimestamp(float(thread_ts), UTC)
    except (OverflowError, OSError, ValueError):  # not a ts Slack wrote
        return None
    if not readable(ledger):  # a ledger with no plain reads: none found
        return None
    window = timedelta(seconds=SLACK_DELIVERY_S)
    return await threads.slack_message_session(
        ledger, channel=channel, ts=thread_ts, since=to_iso(sent - window),
        until=to_iso(sent + window))


async def own_session(ledger: Any, capabilities: Capabilities, session_id: str,
                      actor: Actor) -> str:
    """``session_id`` if ``actor`` may continue it (it is new, theirs, or they may read
    any session); else a session of their own beside it, ``{session_id}:{actor}``."""
    info = await session_info(ledger, session_id)
    if info is None or may_reach(capabilities, actor, info.owner).granted:
        return session_id
    return f"{session_id}:{actor}"


ASK = "agent.ask"
"""What a person must hold to be answered on a channel, as over HTTP."""


def refused_ask(capabilities: Capabilities, actor: Actor, subject: str) -> CapabilityChecked | None:
    """The refusal to record when ``actor`` may not ask the agent, else ``None``."""
    check = capabilities.check(actor, ASK)
    if check.granted:
        return None
    return CapabilityChecked(actor=str(actor), capability=ASK, granted=False,
                             reason_code=check.reason_code, subject=subject)
