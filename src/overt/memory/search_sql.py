"""The terms of a memory search, under the name callers of the memory package have
long imported them by: what words a query is searched for (:func:`words`), the tags
a node is indexed with (:func:`tags`), and the statement that looks for text inside
words (:func:`fragments`). They are defined, with the search's other statements, in
:mod:`overt.ledger.reads.memory_search`, which the ledger package owns."""

from __future__ import annotations

from overt.ledger.reads.memory_search import (
    fragment_terms,
    fragments,
    fts5_term,
    may_be_prefix,
    sqlite_weights,
    tags,
    words,
)

__all__ = ["fragment_terms", "fragments", "fts5_term", "may_be_prefix", "sqlite_weights",
           "tags", "words"]
