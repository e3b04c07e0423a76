"""Typed reads of the chain and the tables beside it, for packages outside the ledger's.

A package that needs more of the record than the :class:`~overt.ledger.base.Ledger`
protocol offers asks one of these functions: each query is written here once, over
the dialect of the ledger's backend, and answers typed values (entries, events,
named tuples, the memory's nodes), never raw rows. No caller writes SQL or tells the
backends apart itself. One module per reader:

- :mod:`.sessions`: sessions' summaries, listed and searched, counts within sessions;
- :mod:`.conversations`: a session's conversation entries with their bodies;
- :mod:`.session_rows` and :mod:`.turns`: the sessions and turns tables, by keyset;
- :mod:`.failures`: entries recording a failure, newest first, and counts of them;
- :mod:`.memory`, :mod:`.memory_search` and :mod:`.memory_provenance`: the memory graph;
- :mod:`.replay`: the entries of the turns replayed, and bodies in bulk;
- :mod:`.web`: the cockpit's reads of the chain;
- :mod:`.threads`: the entries a channel's message is threaded by;
- :mod:`.proofs`: what a prune checks first (seals no prune wrote, the origin).

:mod:`.filters` builds the optional filters several of them share.

Each read takes the ledger and raises :class:`~overt.errors.UsageError` for one that
offers no reads of its tables (:func:`.base.selecting`); :func:`.base.readable`
says so beforehand, for a caller with something else to do then.
"""

from __future__ import annotations

from overt.ledger.reads.base import Selecting, readable, selecting
from overt.ledger.reads.failures import newest_failure_in
from overt.ledger.reads.sessions import count_in_sessions

__all__ = ["Selecting", "count_in_sessions", "newest_failure_in", "readable", "selecting"]
