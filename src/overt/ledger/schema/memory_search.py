"""The memory's word index: a search reads one actor's slice of it.

A search runs within one actor's memory unless asked otherwise, so the index
keeps each actor's nodes together and a search reads that actor's part only,
instead of every actor's matches ANDed with the actor's tag (the index's
longest list). Only current revisions are in it: superseding a node takes the
old revision out, so a search needs no anti-join. It holds nothing that
``memory_nodes`` does not (it can be rebuilt from it); see :mod:`overt.memory.store`
for the ordering.

SQLite: a contentless FTS5 table, ``memory_search`` (porter stemming over title,
body and tags), whose rowid is ``slot << 40 | seq``: ``slot`` numbers the actor
(``memory_search_actors``, in order of first write) and ``seq`` the node
(``memory_search_rows``, in order of insertion). An actor's nodes are then one
rowid range, which FTS5 seeks to in every word's list, and within it the rowid
order is the insertion order. Ids live in ``memory_search_rows`` because a
table's implicit rowid may change on ``VACUUM``. Those two tables are append-only
like the others. One trigger on ``memory_nodes`` (``memory_search_insert``) gives
each new node its slot and seq, indexes it here and in ``memory_trigrams``
(:mod:`.memory_trigrams`, the same rowids), and takes the revision
it supersedes out of both.

- ``columnsize=0``: FTS5's ``bm25`` would read each match's length from the
  ``docsize`` table, one lookup per match: most of the time of a search whose words
  match thousands of nodes. Without that table, FTS5 reports every indexed
  column's length of a contentless table as -1, so ``bm25`` sees each node as
  ``-3`` tokens long against the average length it still keeps (the index's
  totals). Its saturation constant becomes ``k1 * (1 - b + b * -3 / avgdl)``, the
  same for every node, and :func:`overt.ledger.reads.memory_search.sqlite_weights`
  scales the column weights by it so that the score is exactly BM25 with
  ``k1 = 1.2`` and no length normalisation (``b = 0``), as PostgreSQL's ``ts_rank``
  has none either. That constant is positive only while ``avgdl`` exceeds 9 (three
  columns at -1 each, over ``b = 0.75``): every node adds :data:`PAD_TOKENS`
  ``zpad`` tokens to its tags (weighted 0, never searched for) so that it always
  does, however short the nodes.
- ``prefix='3'``: an index of each word's first three characters.
  ``node_search`` matches a word the memory does not hold whole as a prefix
  (:mod:`overt.ledger.reads.memory_search`). Without that index FTS5 merges the
  lists of every indexed word that begins so, over all actors, before the actor's
  rowid range narrows them: the more the memory holds, the slower. Longer prefixes
  match fewer words and need no index of their own.

PostgreSQL: ``memory_search`` is partitioned by a hash of the actor (16
partitions, each with its own GIN index), so a search within one actor reads
one partition's index and rows. Its ``search`` is the vector of the title (weight
A), body (B) and tags (D), english config for the text, plus each of the title's
words marked, ``^word`` (no position), so that the nodes with a query word in
their title can be found in the index alone (see
:mod:`overt.ledger.reads.memory_search`). A trigger on ``memory_nodes`` adds the row and
deletes the superseded revision's row; its function is the owner's, ``SECURITY
DEFINER`` (:mod:`.derived`: the writer role inserts nothing here). The GIN indexes
do not use ``fastupdate``: its pending list is read through by every search until a
vacuum empties it.
"""

from __future__ import annotations

from collections.abc import Callable

SLOT_SHIFT = 40
"""Bits of a ``memory_search`` rowid below the actor's slot (SQLite)."""
SEQ_MASK = (1 << SLOT_SHIFT) - 1
PARTITIONS = 16
"""Hash partitions of ``memory_search`` and ``memory_trigrams`` (PostgreSQL)."""
PAD_TOKENS = 10
"""Tokens every node adds to the word index's length totals (``zpad``, in
``search_tags``), on SQLite."""
_PAD = " zpad" * PAD_TOKENS
PREFIX_INDEX = 3
"""The prefix length FTS5 keeps an index of (``prefix='3'``)."""

_SQLITE = f"""
CREATE TABLE memory_search_actors (
    slot  INTEGER PRIMARY KEY,
    actor TEXT NOT NULL UNIQUE
);
CREATE TABLE memory_search_rows (
    seq     INTEGER PRIMARY KEY,
    node_id TEXT NOT NULL UNIQUE,
    slot    INTEGER NOT NULL
);
CREATE VIRTUAL TABLE memory_search USING fts5(
    title, body, search_tags, content='', columnsize=0, prefix='{PREFIX_INDEX}',
    tokenize='porter unicode61'
);
CREATE TRIGGER memory_search_insert AFTER INSERT ON memory_nodes BEGIN
    INSERT INTO memory_search_actors (actor) SELECT new.actor
        WHERE NOT EXISTS (SELECT 1 FROM memory_search_actors WHERE actor = new.actor);
    INSERT INTO memory_search_rows (node_id, slot)
        SELECT new.id, slot FROM memory_search_actors WHERE actor = new.actor;
    INSERT INTO memory_search (rowid, title, body, search_tags)
        SELECT (slot << {SLOT_SHIFT}) | seq, new.title, new.body, new.search_tags || '{_PAD}'
        FROM memory_search_rows WHERE node_id = new.id;
    INSERT INTO memory_trigrams (rowid, title, body, search_tags)
        SELECT (slot << {SLOT_SHIFT}) | seq, new.title, new.body, new.search_tags
        FROM memory_search_rows WHERE node_id = new.id;
    INSERT INTO memory_search (memory_search, rowid, title, body, search_tags)
        SELECT 'delete', (r.slot << {SLOT_SHIFT}) | r.seq, old.title, old.body,
               old.search_tags || '{_PAD}'
        FROM memory_nodes old JOIN memory_search_rows r ON r.node_id = old.id
        WHERE old.id = new.supersedes;
    INSERT INTO memory_trigrams (memory_trigrams, rowid, title, body, search_tags)
        SELECT 'delete', (r.slot << {SLOT_SHIFT}) | r.seq, old.title, old.body, old.search_tags
        FROM memory_nodes old JOIN memory_search_rows r ON r.node_id = old.id
        WHERE old.id = new.supersedes;
END;
"""

_TITLE_MARKS = ("array_to_tsvector(ARRAY(SELECT '^' || x FROM "
                "unnest(tsvector_to_array(to_tsvector('english', NEW.title))) x))")
_VECTOR = ("setweight(to_tsvector('english', NEW.title), 'A') "
           "|| setweight(to_tsvector('english', NEW.body), 'B') "
           "|| setweight(to_tsvector('simple', NEW.search_tags), 'D') || " + _TITLE_MARKS)


def partitions(table: str) -> str:
    """The :data:`PARTITIONS` hash partitions of ``table`` (PostgreSQL)."""
    return "".join(
        f"CREATE TABLE {table}_{r} PARTITION OF {table} "
        f"FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {r});\n" for r in range(PARTITIONS))


_POSTGRES = f"""
CREATE TABLE memory_search (
    node_id    TEXT NOT NULL,
    actor      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    search     tsvector NOT NULL,
    PRIMARY KEY (node_id, actor)
) PARTITION BY HASH (actor);
{partitions("memory_search")}
CREATE FUNCTION overt_memory_search() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO memory_search (node_id, actor, kind, created_at, search)
        VALUES (NEW.id, NEW.actor, NEW.kind, NEW.created_at, {_VECTOR});
    IF NEW.supersedes IS NOT NULL THEN
        DELETE FROM memory_search WHERE node_id = NEW.supersedes;
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION overt_memory_search() FROM PUBLIC;
CREATE TRIGGER memory_nodes_search AFTER INSERT ON memory_nodes
    FOR EACH ROW EXECUTE FUNCTION overt_memory_search();
CREATE INDEX memory_search_words ON memory_search USING GIN (search) WITH (fastupdate = off);
"""


def sqlite(guard: Callable[[str], str]) -> str:
    """SQLite's word index and the trigger that feeds both memory indexes;
    ``guard(table)`` makes ``table`` append-only."""
    return _SQLITE + guard("memory_search_actors") + guard("memory_search_rows")


def postgres() -> str:
    """PostgreSQL's word index, its trigger and function (``memory_search`` is an index,
    not a record: no guard)."""
    return _POSTGRES
