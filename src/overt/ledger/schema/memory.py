"""The memory graph's tables, the same on both backends.

A node revision is one row of ``memory_nodes``; superseding a node inserts a
new row whose ``supersedes`` names the previous revision. ``root_id`` (the
first revision's id) and ``revision`` (1, 2, ...) name a revision chain, so
the current revision and the history are one index lookup each. ``supersedes``
is unique: a revision is superseded at most once, so a chain never forks, even
when two writers race (the second insert fails in the database).

Links join chains, not revisions: ``from_id`` / ``to_id`` are root ids, so a
link keeps pointing at a node across its revisions. Retracting a link is a row
of ``memory_link_retractions`` (one per link).

``search_tags`` holds one word for the node's kind and one for its actor (see
:func:`overt.ledger.reads.memory_search.tags`), indexed with the text, so a search within
one actor's memory or one kind is narrowed inside the full-text index instead
of ranking every match and filtering afterwards. They weigh nothing in the
ranking.

Provenance: every row names what wrote it, ``turn_id``, ``session_id``,
``tool_call_id`` and ``origin`` (``tool``, ``api`` or ``cli``:
:data:`overt.events.MemoryOrigin`), as the entry recording it (``node.created``,
``node.superseded``, ``link.created``, ``link.retracted``) does, so the chain
covers it and ``verify`` (:mod:`overt.ledger.memory_check`) compares them.

Every table is append-only, by the same guards as the chain's own tables. The
search indexes are in :mod:`.memory_search` and :mod:`.memory_trigrams`.
"""

from __future__ import annotations

from collections.abc import Callable

NODE_TABLES = ("memory_nodes", "memory_links", "memory_link_retractions")

_TABLES = """
CREATE TABLE memory_nodes (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    title        TEXT NOT NULL,
    body         TEXT NOT NULL,
    actor        TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    supersedes   TEXT UNIQUE,
    root_id      TEXT NOT NULL,
    revision     INTEGER NOT NULL,
    turn_id      TEXT,
    search_tags  TEXT NOT NULL,
    session_id   TEXT,
    tool_call_id TEXT,
    origin       TEXT,
    UNIQUE (root_id, revision)
);
CREATE INDEX memory_nodes_kind ON memory_nodes (kind, created_at);
CREATE INDEX memory_nodes_actor ON memory_nodes (actor, created_at);

CREATE TABLE memory_links (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    from_id      TEXT NOT NULL,
    to_id        TEXT NOT NULL,
    actor        TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    turn_id      TEXT,
    session_id   TEXT,
    tool_call_id TEXT,
    origin       TEXT
);
CREATE INDEX memory_links_from ON memory_links (from_id);
CREATE INDEX memory_links_to ON memory_links (to_id);

CREATE TABLE memory_link_retractions (
    link_id      TEXT PRIMARY KEY,
    actor        TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    turn_id      TEXT,
    session_id   TEXT,
    tool_call_id TEXT,
    origin       TEXT
);
"""


def tables(guard: Callable[[str], str]) -> str:
    """The tables, each made append-only by ``guard(table)`` (the backend's guard DDL,
    passed in: the backend's module imports this one)."""
    return _TABLES + "".join(guard(t) for t in NODE_TABLES)
