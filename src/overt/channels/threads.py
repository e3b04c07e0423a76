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
from overt.ledger.sql import POSTGRES, SQLITE, Dialect
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.sessions.access import may_reach
from overt.sessions.book import SessionLedger, session_info

SLACK_DELIVERY_S = 600.0
"""How long after a Slack message's ``ts`` its event may reach overt (Slack retries
for about five minutes): the window a thread's root is looked for in."""


def _field(d: Dialect, *path: str) -> str:
    """A nested JSON field of ``data`` as text."""
    if d.name == "sqlite":
        return f"json_extract(data, '$.{'.'.join(path)}')"
    *parents, last = path
    steps = "".join(f" -> '{p}'" for p in parents)
    return f"(data::json{steps} ->> '{last}')"


async def _first(ledger: object, statement: str, params: Sequence[Any]) -> Any:
    if not isinstance(ledger, SessionLedger):  # a ledger with no plain reads: none found
        return None
    rows = await ledger.select(statement, tuple(params))
    return rows[0] if rows else None


def _reads(ledger: object) -> Dialect | None:
    """The ledger's SQL dialect, or ``None`` for one without plain reads (nothing is
    looked up there: each message starts its own session, as before these lookups)."""
    if not isinstance(ledger, SessionLedger):
        return None
    return SQLITE if ledger.backend == "sqlite" else POSTGRES


async def email_session(ledger: Any, references: Sequence[str], in_reply_to: str,
                        own_domain: str) -> str | None:
    """The session the mail that names ``references`` (else ``in_reply_to``) continues,
    or ``None`` when none of them is a message overt received or sent."""
    ids = list(references) or ([in_reply_to] if in_reply_to else [])
    d = _reads(ledger)
    for message_id in ids:
        found = await ledger.claimed("channel.received", f"email:{message_id}")
        if found is not None and found.session_id:
            return str(found.session_id)
        if d is not None and message_id.startswith("<overt.") and \
                message_id.rstrip(">").endswith(f"@{own_domain}"):
            row = await _first(ledger, (
                "SELECT session_id FROM audit_log WHERE kind = 'channel.replied' "
                f"AND {_field(d, 'source')} = 'email' "
                f"AND {_field(d, 'reply_ids', 'message_id')} = {d.ph} "
                "ORDER BY seq LIMIT 1"), (message_id,))
            if row is not None and row[0]:
                return str(row[0])
    return None


async def slack_main_pane_session(ledger: Any, *, channel: str, user: str, ts: str,
                                  idle_s: float) -> str | None:
    """The session of ``user``'s previous main-pane message in DM ``channel``, when it
    was sent less than ``idle_s`` before ``ts``; else ``None``."""
    d = _reads(ledger)
    if d is None or idle_s <= 0:
        return None
    row = await _first(ledger, (
        f"SELECT session_id, {_field(d, 'channel_ids', 'ts')} FROM audit_log "
        f"WHERE kind = 'channel.received' AND at >= {d.ph} "
        f"AND {_field(d, 'source')} = 'slack_dm' AND {_field(d, 'sender')} = {d.ph} "
        f"AND {_field(d, 'channel_ids', 'channel_id')} = {d.ph} "
        f"AND {_field(d, 'channel_ids', 'ts')} = {_field(d, 'channel_ids', 'thread_ts')} "
        f"AND {_field(d, 'filtered')} IS NULL ORDER BY seq DESC LIMIT 1"),
        (iso_after(-(idle_s + SLACK_DELIVERY_S)), user, channel))
    if row is None or not row[0]:
        return None
    try:
        gap = float(ts) - float(row[1])
    except (TypeError, ValueError):  # a ts Slack did not write: no conversation to join
        return None
    return str(row[0]) if 0 <= gap < idle_s else None


async def slack_thread_session(ledger: Any, *, channel: str, thread_ts: str) -> str | None:
    """The session of the message a thread hangs from (``thread_ts``), if overt
    received it; else ``None``."""
    d = _reads(ledger)
    try:
        sent = datetime.fromtimestamp(float(thread_ts), UTC)
    except (OverflowError, OSError, ValueError):  # not a ts Slack wrote
        return None
    if d is None:
        return None
    window = timedelta(seconds=SLACK_DELIVERY_S)
    row = await _first(ledger, (
        f"SELECT session_id FROM audit_log WHERE kind = 'channel.received' "
        f"AND at >= {d.ph} AND at <= {d.ph} AND {_field(d, 'source')} = 'slack_dm' "
        f"AND {_field(d, 'channel_ids', 'channel_id')} = {d.ph} "
        f"AND {_field(d, 'channel_ids', 'ts')} = {d.ph} ORDER BY seq LIMIT 1"),
        (to_iso(sent - window), to_iso(sent + window), channel, thread_ts))
    return str(row[0]) if row is not None and row[0] else None


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
