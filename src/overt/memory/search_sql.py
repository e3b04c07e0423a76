"""Full-text search of memory nodes: the one statement that differs by backend.

The query text is never handed to a query parser as it is: a model's question
(``"what did we decide about caching?"``) becomes plain words, the same words
on both backends, matched with OR so that one missing word does not empty the
result. Ordering rules are in :mod:`overt.memory.store`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from overt.ledger.sql import Dialect

CURRENT = ("NOT EXISTS (SELECT 1 FROM memory_nodes s WHERE s.supersedes = n.id)")
"""A revision that nothing supersedes (the node alias is ``n``)."""

MAX_WORDS = 16
_WORD = re.compile(r"[^\W_]+")
# Words so common they only slow a search down and blur its ranking (PostgreSQL's
# english configuration drops them too; SQLite's FTS5 would not).
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no",
    "not", "of", "on", "or", "our", "so", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which",
    "who", "why", "will", "with", "you", "your",
))

# bm25 per column (title, body, tags); lower is better, so the score is its negation.
_SQLITE_RANK = "bm25(memory_nodes_fts, 2.0, 1.0, 0.0)"
# ts_rank_cd weights for D (tags: nothing), C (unused), B (body), A (title).
_POSTGRES_RANK = "ts_rank_cd('{0, 0, 0.5, 1.0}', n.search, q)"
# Ties on PostgreSQL compare bytes, as SQLite's BINARY does, whatever the database's
# collation (and without a locale's comparison cost).
_NEWER_FIRST = '{0}.created_at COLLATE "C" DESC, {0}.id COLLATE "C" DESC'
_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")


def kind_tag(kind: str) -> str:
    return "zk" + kind.lower()


def actor_tag(actor: str) -> str:
    """One letters-only word per actor (a digest: actor names hold ``:`` and ``-``,
    which tokenizers split on)."""
    return "za" + hashlib.sha256(actor.encode("utf-8")).hexdigest()[:24].translate(_LETTERS)


def tags(kind: str, actor: str) -> str:
    """The ``search_tags`` of a node: its kind and actor as searchable words."""
    return f"{kind_tag(kind)} {actor_tag(actor)}"


def words(query: str) -> list[str]:
    """The words of ``query`` searched for: lower-cased, no stop words, no repeats,
    at most :data:`MAX_WORDS`."""
    seen: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word not in STOP_WORDS and word not in seen:
            seen.append(word)
    return seen[:MAX_WORDS]


def search(d: Dialect, terms: list[str], *, kind: str | None, actor: str | None, limit: int,
           columns: str) -> tuple[str, list[Any]]:
    """(statement, params) selecting ``columns`` of node alias ``n`` plus a score column.

    With no ``terms``: the newest current nodes (score 0). With terms, the kind
    and actor narrow the match inside the index (their tags), and are checked
    again on the rows found.
    """
    filters: list[str] = []
    params: list[Any] = []
    for column, value in (("kind", kind), ("actor", actor)):
        if value is not None:
            filters.append(f"n.{column} = {d.ph}")
            params.append(value)
    cols = ", ".join(f"n.{c.strip()}" for c in columns.split(","))
    where = "".join(f" AND {f}" for f in filters)
    if not terms:
        return (f"SELECT {cols}, 0.0 FROM memory_nodes n WHERE {CURRENT}{where} "
                f"ORDER BY n.created_at DESC, n.id DESC LIMIT {d.ph}", [*params, limit])
    narrow = [*([kind_tag(kind)] if kind is not None else []),
              *([actor_tag(actor)] if actor is not None else [])]
    if d.name == "sqlite":
        match = "{title body} : (" + " OR ".join(f'"{t}"' for t in terms) + ")"
        match += "".join(f' AND search_tags : "{t}"' for t in narrow)
        # Rank inside the index (no row is read for a match that is not kept), then
        # read the few rows kept. Ties inside the index go to the newer row (rowid).
        return (f"SELECT {cols}, -f.rank AS score FROM (SELECT rowid, {_SQLITE_RANK} AS rank "
                f"FROM memory_nodes_fts WHERE memory_nodes_fts MATCH {d.ph} "
                f"ORDER BY rank, rowid DESC LIMIT {d.ph}) f "
                f"JOIN memory_nodes n ON n.rowid = f.rowid WHERE 1 = 1{where} "
                f"ORDER BY f.rank, n.created_at DESC, n.id DESC",
                [match, limit, *params])
    # One tsquery for the GIN index: the words (ranked) and the tags (not ranked).
    # Ranking reads each match's tsvector from its row, so the matches are ranked
    # on narrow rows (id, time, rank) and only the ``limit`` kept are read whole:
    # sorting or anti-joining whole rows (~1.4 KB each) spills to disk past a few
    # thousand matches. ``OFFSET 0`` keeps the kind and actor checks on the rows
    # found, off their b-tree indexes (the tags already narrowed the match; ANDing
    # in a bitmap of one actor's 25,000 rows only costs).
    tag_query = " & ".join(narrow) if narrow else None
    matched = f"(q && to_tsquery('simple', {d.ph}))" if tag_query else "q"
    checks = " AND ".join(f.replace("n.", "m.", 1) for f in filters) or "TRUE"
    return (f"SELECT {cols}, f.score FROM (SELECT m.id, m.created_at, m.score FROM ("
            f"SELECT n.id, n.created_at, n.kind, n.actor, {_POSTGRES_RANK} AS score "
            f"FROM memory_nodes n, to_tsquery('english', {d.ph}) q "
            f"WHERE n.search @@ {matched} OFFSET 0) m "
            f"WHERE {checks} AND {CURRENT.replace('n.id', 'm.id')} "
            f"ORDER BY m.score DESC, {_NEWER_FIRST.format('m')} LIMIT {d.ph}) f "
            f"JOIN memory_nodes n ON n.id = f.id "
            f"ORDER BY f.score DESC, {_NEWER_FIRST.format('f')}",
            [" | ".join(terms), *([tag_query] if tag_query else []), *params, limit])
