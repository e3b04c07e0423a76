"""Migration 5: the memory graph's tables, one function per dialect.

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

Every table is append-only, by the same triggers as the chain's own tables.
Search: SQLite keeps an FTS5 index (porter stemming) over ``title`` and
``body``, fed by an insert trigger that also drops the superseded revision from
the index, so only current revisions are found. PostgreSQL keeps a generated
``tsvector`` (title weight A, body weight B, english config) with a GIN index;
its queries leave superseded revisions out with an anti-join on ``supersedes``.
Migration 7 (:mod:`overt.ledger.schema.memory_search`) replaces both indexes
with one that keeps each actor's nodes together.

The guard builders come from the dialect's schema module (passed in, since that
module imports this one).
"""

from __future__ import annotations

from collections.abc import Callable

NODE_TABLES = ("memory_nodes", "memory_links", "memory_link_retractions")

_TABLES = """
CREATE TABLE memory_nodes (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    supersedes  TEXT UNIQUE,
    root_id     TEXT NOT NULL,
    revision    INTEGER NOT NULL,
    turn_id     TEXT,
    search_tags TEXT NOT NULL,
    UNIQUE (root_id, revision)
);
CREATE INDEX memory_nodes_kind ON memory_nodes (kind, created_at);
CREATE INDEX memory_nodes_actor ON memory_nodes (actor, created_at);

CREATE TABLE memory_links (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    from_id     TEXT NOT NULL,
    to_id       TEXT NOT NULL,
    actor       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    turn_id     TEXT
);
CREATE INDEX memory_links_from ON memory_links (from_id);
CREATE INDEX memory_links_to ON memory_links (to_id);

CREATE TABLE memory_link_retractions (
    link_id     TEXT PRIMARY KEY,
    actor       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    turn_id     TEXT
);
"""

_SQLITE_FTS = """
CREATE VIRTUAL TABLE memory_nodes_fts USING fts5(
    title, body, search_tags, content='memory_nodes', content_rowid='rowid',
    tokenize='porter unicode61'
);
CREATE TRIGGER memory_nodes_fts_insert AFTER INSERT ON memory_nodes BEGIN
    INSERT INTO memory_nodes_fts (rowid, title, body, search_tags)
        VALUES (new.rowid, new.title, new.body, new.search_tags);
    INSERT INTO memory_nodes_fts (memory_nodes_fts, rowid, title, body, search_tags)
        SELECT 'delete', old.rowid, old.title, old.body, old.search_tags FROM memory_nodes old
        WHERE old.id = new.supersedes;
END;
"""

_POSTGRES_FTS = """
ALTER TABLE memory_nodes ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', title), 'A')
    || setweight(to_tsvector('english', body), 'B')
    || setweight(to_tsvector('simple', search_tags), 'D')) STORED;
CREATE INDEX memory_nodes_search ON memory_nodes USING GIN (search);
"""


def sqlite(guard: Callable[[str], str]) -> str:
    """The SQLite migration; ``guard(table)`` is the DDL that makes ``table`` append-only."""
    return _TABLES + _SQLITE_FTS + "".join(guard(t) for t in NODE_TABLES)


def postgres(guard: Callable[[str], str]) -> str:
    """The PostgreSQL migration; ``guard(table)`` as for :func:`sqlite`."""
    return _TABLES + _POSTGRES_FTS + "".join(guard(t) for t in NODE_TABLES)
