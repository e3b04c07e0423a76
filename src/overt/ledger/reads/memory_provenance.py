"""Where the chain records a memory write: the ``node.created`` / ``node.superseded``
entry of each revision, and the tool of the call that wrote it (its
``tool_call.started``). :mod:`overt.memory.provenance` joins them to the revisions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from overt.ledger.chain import entry_data
from overt.ledger.reads.base import selecting
from overt.ledger.schema.derived import MEMORY_ID
from overt.ledger.sql import KIND_INDEXED, chunks, direct_calls

_RECORDS = "('node.created', 'node.superseded')"

CallKey = tuple[str | None, str]
"""A tool call: (its turn, ``None`` outside any; its id)."""


class Recorded(NamedTuple):
    """The entry recording a revision: its seq and time."""

    seq: int
    at: str


class TurnWrites(NamedTuple):
    """What some turns' entries say of their memory writes: the entry recording each
    revision (by node id; the newest when several name one) and the tool of each call
    (by turn and call id)."""

    records: dict[str, Recorded]
    tools: dict[CallKey, str]


async def turn_writes(ledger: object, turn_ids: Sequence[str]) -> TurnWrites:
    """The records of memory writes and the tools of calls in ``turn_ids`` (through the
    turn index, a chunk of turns a read).

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or an entry is malformed.
    """
    reader, d = selecting(ledger)
    out = TurnWrites({}, {})
    for chunk in chunks(sorted(set(turn_ids))):
        for seq, kind, at, turn, data_json in await reader.select(
                f"SELECT seq, kind, at, turn_id, data FROM audit_log WHERE turn_id IN "
                f"({d.phs(len(chunk))}) AND kind IN ({_RECORDS[1:-1]}, 'tool_call.started') "
                "ORDER BY seq", chunk):
            data = entry_data(data_json, int(seq))
            if kind == "tool_call.started":
                out.tools.setdefault((turn, str(data.get("tool_call_id"))),
                                     str(data["tool_name"]))
            else:
                out.records[str(data.get("node_id"))] = Recorded(int(seq), str(at))
    return out


async def direct_call_tools(ledger: object, call_ids: Sequence[str]) -> dict[str, str]:
    """The tool of each of ``call_ids``, calls made outside any turn (through
    ``audit_log_direct_calls``); a call whose ``tool_call.started`` is gone is left out.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read, or an entry is malformed.
    """
    reader, d = selecting(ledger)
    tools: dict[str, str] = {}
    for chunk in chunks(sorted(set(call_ids))):
        for seq, _, kind, _, _, _, data_json, *_ in await reader.select(
                direct_calls(d, len(chunk)), chunk):
            data = entry_data(data_json, int(seq))
            if kind == "tool_call.started":
                tools.setdefault(str(data.get("tool_call_id")), str(data["tool_name"]))
    return tools


async def node_record(ledger: object, node_id: str) -> Recorded | None:
    """The newest entry recording the revision ``node_id`` (through the index of the
    entries by node id); ``None`` when a prune removed it.

    Raises:
        UsageError: ``ledger`` offers no reads of its tables.
        LedgerError: the ledger could not be read.
    """
    reader, d = selecting(ledger)
    column = MEMORY_ID if d.name == "postgres" else d.text("node_id")  # as indexed
    found = await reader.select(
        f"SELECT seq, at FROM audit_log WHERE kind IN {_RECORDS} AND {KIND_INDEXED} "
        f"AND {column} = {d.ph} ORDER BY seq DESC LIMIT 1", (node_id,))
    return Recorded(int(found[0][0]), str(found[0][1])) if found else None
