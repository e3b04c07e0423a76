"""Full-text search of memory nodes: the one statement that differs by backend.

The query text is never handed to a query parser as it is: a model's question
(``"what did we decide about caching?"``) becomes plain terms, the same terms
on both backends, matched with OR so that one missing word does not empty the
result. Ordering rules are in :mod:`overt.memory.store`; the search itself is
:func:`overt.ledger.reads.memory.search`.

Terms are of two sorts (:func:`words`):

- a **word** is matched whole (stemmed, as what is indexed is: ``evictions``
  finds ``eviction``) when the memory searched holds it whole; otherwise, when
  it is three characters or more or not ASCII, as a prefix of the indexed
  words: ``Iso`` finds ``Isokron``, ``東京`` finds ``東京のサーバー``. (A
  prefix match costs more than a whole word's, even with SQLite's index of
  three-letter prefixes, so a word that is
  there whole is not also matched as a prefix: ``iso`` in a memory that says
  ``ISO 8601`` finds that; ``isok`` finds Isokron. A prefix match counts as a
  match of the word: BM25 on SQLite, ``ts_rank`` on PostgreSQL.)
- a **key**, words joined by ``-``, ``.``, ``_``, ``/`` or ``:`` (``PICK-12``,
  ``v2.3``, ``node_search``), is matched as those words in that order and
  nothing more: ``PICK-12`` finds the node that says PICK-12, not one that says
  only PICK-123 (SQLite: an FTS5 phrase; PostgreSQL: ``phraseto_tsquery``).

A word of three characters or more is also looked for **inside** words, through
the index of trigrams (SQLite's FTS5 ``trigram``, PostgreSQL's
``pg_trgm``), when the word matches leave room in the result: ``kron`` finds
``Isokron``, ``サーバー`` finds ``東京のサーバー``. Such a match ranks after every
word match (:func:`fragments`). A key is not: ``PICK-12`` still finds PICK-12 and
not PICK-123.

A term holds letters, digits and those joiners only, so nothing a user types
(quotes, ``*``, parentheses, ``NEAR``, ``:``) reaches FTS5 or ``to_tsquery`` as
syntax, nor ``%`` or ``_`` a ``LIKE`` pattern.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from typing import Any

from overt.ledger.reads.filters import given
from overt.ledger.schema.memory_search import SEQ_MASK, SLOT_SHIFT
from overt.ledger.schema.memory_trigrams import TEXT
from overt.ledger.sql import Dialect

CURRENT = ("NOT EXISTS (SELECT 1 FROM memory_nodes s WHERE s.supersedes = n.id)")
"""A revision that nothing supersedes (the node alias is ``n``)."""

MAX_WORDS = 16
_WORD = re.compile(r"[^\W_]+(?:[-./:_][^\W_]+)*")
_JOINERS = frozenset("-./:_")
PREFIX_MIN = 3
"""The length from which an ASCII word is matched as a prefix."""
FRAGMENT_MIN = 3
"""The length from which a word is looked for inside words (a trigram's)."""
# Words so common they only slow a search down and blur its ranking (PostgreSQL's
# english configuration drops them too; SQLite's FTS5 would not).
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no",
    "not", "of", "on", "or", "our", "so", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which",
    "who", "why", "will", "with", "you", "your",
))

# bm25 per column (title, body, tags), weights from sqlite_weights; lower is better,
# so the score is its negation.
_SQLITE_RANK = "bm25(memory_search, ?, ?, 0.0)"
BM25_B = 0.75
"""FTS5's own ``bm25`` length constant ``b`` (fixed in SQLite's source; its ``k1``
cancels out of :func:`sqlite_weights`)."""
TITLE_WEIGHT = 2.0
"""A title word counts as two body words."""
PLAIN_WEIGHTS = (TITLE_WEIGHT, 1.0)
"""(title, body) ``bm25`` weights as they are, for an index with nothing to scale them by."""
SQLITE_AVERAGES = "SELECT block FROM memory_search_data WHERE id = 1"
"""FTS5's averages record of ``memory_search``: a varint row count, then each
column's token total (FTS5's on-disk format)."""
# ts_rank weights for D (tags: nothing), C (unused), B (body), A (title). Not
# ts_rank_cd: for OR queries that is the weighted count of occurrences, at about five
# times ts_rank's cost per match (a cover search, a buffer zeroed per query item).
_POSTGRES_RANK = "ts_rank('{0, 0, 0.5, 1.0}', m.search, w.q)"
# PostgreSQL's query ``w``: the distinct stems of the words (english) ORed, ``q``,
# and ``sure``: any of them in a title (the index marks a title's words ``^word``)
# or any two of them. Per stem found, ts_rank adds its highest weight plus its
# other occurrences' at 1/i^2 (i from the first), over pi^2/6, over the stems in
# ``q``: under 0.5 / size for a stem in the body only; at least 1 / 1.6449 / size
# for one in the title, and 2 * 0.5 / 1.6449 / size for two stems in the body. So
# a node matching ``sure`` (unless a stem is among its tags only, which weigh
# nothing) outranks every node with one stem in its body only: when the ``limit``
# best of them score over 0.5 / size, they are the top, and the other matches
# (most of them, for frequent words) are not read.
_OPERAND = r"'''' || replace(replace({0}, '\', '\\'), '''', '''''') || ''''"
# ``lx``: the words' stems, each with ``:*`` when it is matched as a prefix: long
# enough (see is_prefix) and not found whole in the memory searched ({1}: that
# actor's part, else all). ``w``: ``items``, the stems and each key's phrase (the
# query's operands), and the stems' title marks. Parameters, in the order they
# appear: the actor if any, the words (space-separated), the keys (an array).
_POSTGRES_WORDS = (
    "lx AS MATERIALIZED (SELECT x, CASE WHEN "
    f"(length(x) >= {PREFIX_MIN} OR x !~ '^[[:ascii:]]*$') AND NOT EXISTS (SELECT 1 "
    f"FROM memory_search e WHERE e.search @@ ({_OPERAND.format('x')})::tsquery{{1}}) "
    "THEN ':*' ELSE '' END AS star "
    "FROM unnest(tsvector_to_array(to_tsvector('english', {0}))) x), "
    "w AS MATERIALIZED (SELECT cardinality(items) AS size, "
    "nullif(array_to_string(items, ' | '), '')::tsquery AS q, "
    "nullif(array_to_string(marks || ARRAY(SELECT '(' || a || ' & ' || b || ')' "
    "FROM unnest(items) WITH ORDINALITY s(a, i) JOIN unnest(items) WITH ORDINALITY t(b, j) "
    "ON i < j), ' | '), '')::tsquery AS sure "
    f"FROM (SELECT ARRAY(SELECT {_OPERAND.format('x')} || star FROM lx) "
    "|| ARRAY(SELECT '(' || p || ')' FROM (SELECT phraseto_tsquery('english', k)::text AS p "
    "FROM unnest({2}::text[]) k) keys WHERE p <> '') AS items, "
    f"ARRAY(SELECT {_OPERAND.format(chr(39) + '^' + chr(39) + ' || x')} || star "
    "FROM lx) AS marks) o)")
# Ties on PostgreSQL compare bytes, as SQLite's BINARY does, whatever the database's
# collation (and without a locale's comparison cost).
_NEWER_FIRST = '{0}.created_at COLLATE "C" DESC, {0}.node_id COLLATE "C" DESC'
# An actor's rowids in SQLite's index: from its slot's first to its last.
_SLOT = f"(SELECT slot << {SLOT_SHIFT} FROM memory_search_actors WHERE actor = ?)"
_SEQ = f"rowid & {SEQ_MASK}"
_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")


def _varints(block: bytes) -> list[int] | None:
    """SQLite's varints (big-endian 7-bit groups, a ninth byte of 8 bits) in
    ``block``; ``None`` if the last one is cut short."""
    out: list[int] = []
    i = 0
    while i < len(block):
        value = 0
        for k in range(9):
            if i == len(block):
                return None
            byte = block[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def sqlite_weights(averages: bytes | None) -> tuple[float, float]:
    """The (title, body) weights for ``bm25`` that make its score BM25 with
    ``k1 = 1.2`` and no length normalisation, for an index whose averages record
    (:data:`SQLITE_AVERAGES`) is ``averages``.

    ``memory_search`` keeps no per-node lengths (``columnsize=0``), so ``bm25`` takes
    every node as -3 tokens long and saturates each word's weighted count ``F``
    as ``F / (F + K)`` with ``K = k1 * (1 - b + b * -3 / avgdl)``. Weights scaled
    by ``K / k1`` make that ``T / (T + k1)``, ``T`` being twice the word's
    occurrences in the title plus those in the body: a node's score is the sum,
    over the query words it holds, of ``idf * (k1 + 1) * T / (T + k1)``. The
    padding of every node's tags (:data:`overt.ledger.schema.memory_search.PAD_TOKENS`)
    keeps ``avgdl`` above 9, so ``K`` positive; an empty index (no record yet) has
    nothing to rank.
    """
    counts = _varints(averages) if averages else None
    if not counts or len(counts) < 2 or counts[0] == 0 or sum(counts[1:]) == 0:
        return PLAIN_WEIGHTS  # nothing indexed (or a record FTS5 would refuse too)
    rows, *totals = counts
    scale = 1 - BM25_B + BM25_B * -len(totals) / (sum(totals) / rows)
    if scale <= 0:  # totals the padding cannot give: rank as the weights say
        return PLAIN_WEIGHTS
    return TITLE_WEIGHT * scale, scale


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


def is_key(term: str) -> bool:
    """Whether ``term`` is a key (words joined), matched as a phrase."""
    return any(c in _JOINERS for c in term)


def may_be_prefix(term: str) -> bool:
    """Whether ``term`` is a word long enough to be matched as a prefix (if the
    memory searched does not hold it whole)."""
    return not is_key(term) and (len(term) >= PREFIX_MIN or not term.isascii())


def fts5_term(term: str, prefix: bool = False) -> str:
    """``term`` as an FTS5 phrase, or prefix (a term holds no ``"``: see :func:`words`)."""
    return f'"{term}"' + ("*" if prefix else "")


def _sqlite_within(actor: str | None) -> str:
    return f" AND rowid BETWEEN {_SLOT} AND {_SLOT} + {SEQ_MASK}" if actor is not None else ""


def sqlite_found_whole(words: list[str], actor: str | None) -> tuple[str, list[Any]]:
    """(statement, params) of one row saying, for each of ``words``, whether the
    memory searched (``actor``'s, else all) holds it whole (SQLite); the others
    are matched as prefixes."""
    within = _sqlite_within(actor)
    found = ", ".join(f"EXISTS (SELECT 1 FROM memory_search WHERE memory_search MATCH ?"
                      f"{within})" for _ in words)
    params: list[Any] = []
    for word in words:
        params += ["{title body} : " + fts5_term(word), *([actor, actor] if actor else [])]
    return f"SELECT {found}", params


def search(d: Dialect, terms: list[str], *, kind: str | None, actor: str | None, limit: int,
           columns: str, weights: tuple[float, float] = PLAIN_WEIGHTS,
           prefixes: Collection[str] = ()) -> tuple[str, list[Any]]:
    """(statement, params) selecting ``columns`` of node alias ``n`` plus a score column.

    With no ``terms``: the newest current nodes (score 0). With terms, the search
    reads the actor's part of the index only (SQLite: its rowid range; PostgreSQL:
    its partition, narrowed by its tag), the kind narrows the match inside the
    index (its tag), and both are checked again on the rows found. ``weights``
    are SQLite's (title, body) ``bm25`` weights (:func:`sqlite_weights`), and
    ``prefixes`` the terms SQLite matches as prefixes (:func:`sqlite_found_whole`);
    PostgreSQL decides that inside the statement.
    """
    filters, params = given((f"n.kind = {d.ph}", kind), (f"n.actor = {d.ph}", actor))
    cols = ", ".join(f"n.{c.strip()}" for c in columns.split(","))
    where = "".join(f" AND {f}" for f in filters)
    if not terms:
        return (f"SELECT {cols}, 0.0 FROM memory_nodes n WHERE {CURRENT}{where} "
                f"ORDER BY n.created_at DESC, n.id DESC LIMIT {d.ph}", [*params, limit])
    if d.name == "sqlite":
        match = "{title body} : (" + " OR ".join(fts5_term(t, t in prefixes)
                                                 for t in terms) + ")"
        if kind is not None:
            match += f' AND search_tags : "{kind_tag(kind)}"'
        # Rank inside the index, within the actor's rowid range (no row is read for
        # a match that is not kept), then read the few rows kept. Ties inside the
        # index go to the newer row (the larger seq).
        within = _sqlite_within(actor)
        return (f"SELECT {cols}, -f.rank AS score FROM (SELECT {_SEQ} AS seq, {_SQLITE_RANK} "
                f"AS rank FROM memory_search WHERE memory_search MATCH ?{within} "
                f"ORDER BY rank, {_SEQ} DESC LIMIT ?) f "
                f"JOIN memory_search_rows r ON r.seq = f.seq "
                f"JOIN memory_nodes n ON n.id = r.node_id "
                f"WHERE 1 = 1{where} ORDER BY f.rank, n.created_at DESC, n.id DESC",
                [*weights, match, *([actor, actor] if actor is not None else []), limit,
                 *params])
    # The tags narrow the GIN match (an actor's partition may hold other actors'
    # nodes); only current revisions are in memory_search. The nodes sure to outrank
    # the others first (see _POSTGRES_WORDS), every match only when they are too few;
    # the ``limit`` kept are read from memory_nodes.
    narrow = [*([kind_tag(kind)] if kind is not None else []),
              *([actor_tag(actor)] if actor is not None else [])]
    tag_query = " & ".join(narrow) if narrow else None
    checks = "".join(f" AND {f.replace('n.', 'm.', 1)}" for f in filters)
    narrowing = [*([tag_query] if tag_query else []), *params]

    def ranked(query: str, only_if: str) -> str:
        matched = f"({query} && to_tsquery('simple', {d.ph}))" if tag_query else query
        return (f"SELECT m.node_id, m.created_at, {_POSTGRES_RANK} AS score "
                f"FROM memory_search m, w WHERE {only_if}m.search @@ {matched}{checks} "
                f"ORDER BY score DESC, {_NEWER_FIRST.format('m')} LIMIT {d.ph}")

    scope = f" AND e.actor = {d.ph}" if actor is not None else ""
    return (f"WITH {_POSTGRES_WORDS.format(d.ph, scope, d.ph)}, "
            f"top AS MATERIALIZED ({ranked('w.sure', '')}), "
            f"found AS (SELECT coalesce(count(*) = {d.ph} AND min(score)::float8 > "
            f"0.5 / nullif((SELECT size FROM w), 0), false) AS enough FROM top), "
            f"rest AS ({ranked('w.q', 'NOT (SELECT enough FROM found) AND ')}) "
            f"SELECT {cols}, f.score FROM (SELECT * FROM top WHERE (SELECT enough FROM found) "
            f"UNION ALL SELECT * FROM rest) f JOIN memory_nodes n ON n.id = f.node_id "
            f"ORDER BY f.score DESC, {_NEWER_FIRST.format('f')}",
            [*([actor] if actor else []), " ".join(t for t in terms if not is_key(t)),
             [t for t in terms if is_key(t)], *narrowing, limit, limit, *narrowing, limit])


def fragment_terms(terms: list[str]) -> list[str]:
    """The terms looked for inside words: words (not keys) of :data:`FRAGMENT_MIN`
    characters or more."""
    return [t for t in terms if not is_key(t) and len(t) >= FRAGMENT_MIN]


def _like(term: str) -> str:
    """``term`` inside any text, as a ``LIKE`` pattern (a term holds no ``%``, ``_``
    or ``\\``: escaped all the same)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def fragments(d: Dialect, terms: list[str], *, kind: str | None, actor: str | None,
              limit: int, columns: str, skip: Collection[str] = ()) -> tuple[str, list[Any]]:
    """(statement, params) selecting ``columns`` of node alias ``n`` plus a score of 0:
    the current nodes, of ``kind`` and ``actor`` when given and not among ``skip``
    (the word matches already found), whose title or body holds one of ``terms``
    (:func:`fragment_terms`) anywhere, case aside, at most ``limit``.

    They follow the word matches, whatever their rank: a caller asks for them only
    to fill the places those leave (see
    :func:`overt.ledger.reads.memory.search`). Among themselves, the more of
    the terms a node holds the higher it ranks, a title's counting twice a body's,
    then the newer first. SQLite: ``bm25`` over ``memory_trigrams`` (title weight
    2, body 1), inside the index and within the actor's rowid range, so only the
    rows kept are read; PostgreSQL: 2 per term in the title plus 1 per term in the
    body, over the rows the trigram index of the actor's partition of
    ``memory_trigrams`` finds.
    """
    filters, params = given((f"n.kind = {d.ph}", kind), (f"n.actor = {d.ph}", actor))
    cols = ", ".join(f"n.{c.strip()}" for c in columns.split(","))
    ranked: list[str] = []
    rank_params: list[Any] = []
    if d.name == "sqlite":
        if skip:
            filters.append(f"n.id NOT IN ({d.phs(len(skip))})")
            params += list(skip)
        match = "{title body} : (" + " OR ".join(fts5_term(t) for t in terms) + ")"
        if kind is not None:  # the kind's tag, then the actor's (``tags``): that kind only
            match += f' AND search_tags : "{kind_tag(kind)} za"'
        where = "".join(f" AND {f}" for f in filters)
        # the best ``limit`` and as many again as may be skipped, ranked in the index
        return (f"SELECT {cols}, 0.0 FROM (SELECT {_SEQ} AS seq, "
                f"bm25(memory_trigrams, {TITLE_WEIGHT}, 1.0, 0.0) AS rank "
                f"FROM memory_trigrams WHERE memory_trigrams MATCH ?{_sqlite_within(actor)} "
                f"ORDER BY rank, {_SEQ} DESC LIMIT ?) f "
                f"JOIN memory_search_rows r ON r.seq = f.seq "
                f"JOIN memory_nodes n ON n.id = r.node_id WHERE 1 = 1{where} "
                f"ORDER BY f.rank, n.created_at DESC, n.id DESC LIMIT ?",
                [match, *([actor, actor] if actor is not None else []), limit + len(skip),
                 *params, limit])
    # PostgreSQL: the actor's partition of memory_trigrams (current revisions only),
    # ranked there; the ``limit`` kept are read from memory_nodes
    checks = [f.replace("n.", "t.", 1) for f in filters]
    if skip:
        checks.append(f"NOT (t.node_id = ANY({d.ph}))")
        params.append(list(skip))
    text = TEXT.replace("title", "t.title").replace("body", "t.body")
    found = " OR ".join(f"{text} ILIKE {d.ph}" for _ in terms)
    for term in terms:
        ranked.append(f"CASE WHEN t.title ILIKE {d.ph} THEN 2 ELSE 0 END "
                      f"+ CASE WHEN t.body ILIKE {d.ph} THEN 1 ELSE 0 END")
        rank_params += [_like(term), _like(term)]
    where = "".join(f" AND {c}" for c in checks)
    newer = 'f.created_at COLLATE "C" DESC, f.node_id COLLATE "C" DESC'
    return (f"SELECT {cols}, 0.0 FROM (SELECT t.node_id, t.created_at, "
            f"{' + '.join(ranked)} AS rank FROM memory_trigrams t WHERE ({found}){where} "
            f"ORDER BY rank DESC, {newer.replace('f.', 't.')} LIMIT {d.ph}) f "
            f"JOIN memory_nodes n ON n.id = f.node_id ORDER BY f.rank DESC, {newer}",
            [*rank_params, *(_like(t) for t in terms), *params, limit])
