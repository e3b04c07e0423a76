"""Export the audit tier as JSON lines.

Reads any :class:`~overt.ledger.base.Ledger` through ``entries()``, so it works
on every backend, and never reads the content tier: what leaves is
identifiers, statuses, numbers and hashes, never message text, tool arguments
or tool results. One audit entry per line, :meth:`Entry.to_dict` in canonical
JSON, in ``seq`` order. OpenTelemetry export is in :mod:`overt.telemetry`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from overt.ledger.base import Ledger
from overt.ledger.canonical import canonical_json

if TYPE_CHECKING:
    pass

async def export_jsonl(ledger: Ledger, out: TextIO, *, session_id: str | None = None,
                       since: str | None = None, until: str | None = None) -> int:
    """Write the audit entries matching the filters to ``out``, one canonical JSON
    object per line, in ``seq`` order. Returns how many were written.

    ``since`` is inclusive, ``until`` exclusive (ledger timestamps).

    Raises:
        LedgerError: the ledger cannot be read.
        OSError: ``out`` cannot be written.
    """
    entries = await ledger.entries(session_id=session_id, since=since, until=until)
    for entry in entries:
        out.write(canonical_json(entry.to_dict()))
        out.write("\n")
    out.flush()
    return len(entries)


# -- spans from records -------------------------------------------------------

