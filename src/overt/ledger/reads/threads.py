"""Which session a channel's message continues, as the record says: the session of a
reply overt sent by email, and of a Slack DM's earlier messages. The rules are
:mod:`overt.channels.threads`'s; these reads find the entries they ask about."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from overt.ledger.reads.base import Selecting, selecting
from overt.ledger.sql import Dialect


class SlackMessage(NamedTuple):
    """A Slack message overt received: the session it went to, and Slack's ``ts``."""

    session_id: str | None
    ts: str | None


def _field(d: Dialect, *path: str) -> str:
    """A nested JSON field of ``data`` as text."""
    if d.name == "sqlite":
        return f"json_extract(data, '$.{'.'.join(path)}')"
    *parents, last = path
    steps = "".join(f" -> '{p}'" for p in parents)
    return f"(data::json{steps} ->> '{last}')"


def _slack_received(d: Dialect) -> str:
    """Whether an entry is a Slack DM message overt received in a channel (the next
    parameter) at or after a time (the one after)."""
    return (f"kind = 'channel.received' AND {_field(d, 'source')} = 'slack_dm' "
            f"AND {_field(d, 'channel_ids', 'channel_id')} = {d.ph} AND at >= {d.ph}")


async def _first(reader: Selecting, statement: str, params: Sequence[Any]) -> Any:
    rows = await reader.select(statement, tuple(params))
    return rows[0] if rows else None


async def email_reply_session(ledger: object, message_id: str) -> str | None:
    """The session of the first email reply overt sent as ``message_id`` (its
    ``channel.replied``); ``None`` when it sent none, or named no session.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    row = await _first(reader, (
        "SELECT session_id FROM audit_log WHERE kind = 'channel.replied' "
        f"AND {_field(d, 'source')} = 'email' "
        f"AND {_field(d, 'reply_ids', 'message_id')} = {d.ph} "
        "ORDER BY seq LIMIT 1"), (message_id,))
    return str(row[0]) if row is not None and row[0] else None


async def slack_last_main_pane(ledger: object, *, channel: str, user: str,
                               since: str) -> SlackMessage | None:
    """``user``'s newest message in the main pane of DM ``channel`` received at or
    after ``since`` (one overt answered: not filtered), or ``None``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    row = await _first(reader, (
        f"SELECT session_id, {_field(d, 'channel_ids', 'ts')} FROM audit_log "
        f"WHERE {_slack_received(d)} AND {_field(d, 'sender')} = {d.ph} "
        f"AND {_field(d, 'channel_ids', 'ts')} = {_field(d, 'channel_ids', 'thread_ts')} "
        f"AND {_field(d, 'filtered')} IS NULL ORDER BY seq DESC LIMIT 1"),
        (channel, since, user))
    return SlackMessage(row[0], row[1]) if row is not None else None


async def slack_message_session(ledger: object, *, channel: str, ts: str, since: str,
                                until: str) -> str | None:
    """The session of the Slack DM message ``ts`` in ``channel`` that overt received
    between ``since`` and ``until`` (the first such), or ``None``.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    row = await _first(reader, (
        f"SELECT session_id FROM audit_log WHERE {_slack_received(d)} AND at <= {d.ph} "
        f"AND {_field(d, 'channel_ids', 'ts')} = {d.ph} ORDER BY seq LIMIT 1"),
        (channel, since, until, ts))
    return str(row[0]) if row is not None and row[0] else None
