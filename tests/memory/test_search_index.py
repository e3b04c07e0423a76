"""The search index on both backends: each actor's nodes kept together, current
revisions only."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from overt.memory.store import Writer, store_for
from tests.backends import Raw
from tests.conftest import run

ALICE = Writer("agent:alice")
BOB = Writer("agent:bob")


def test_a_revision_superseded_by_another_actor_leaves_the_index(ledger: Any) -> None:
    store = store_for(ledger)
    first = run(store.create_node("Note", "Cache size", "two gigabytes", ALICE))
    second = run(store.supersede(first, "Cache size", "four gigabytes", BOB))
    assert run(store.search("two")) == []
    assert run(store.search("cache", actor="agent:alice")) == []
    assert [h.node.id for h in run(store.search("cache", actor="agent:bob"))] == [second.id]


def test_the_memory_of_an_actor_who_never_wrote_has_nothing_to_find(ledger: Any) -> None:
    store = store_for(ledger)
    run(store.create_node("Note", "Cache size", "two gigabytes", ALICE))
    assert run(store.search("cache", actor="agent:nobody")) == []
    assert run(store.search("cache", kind="Note", actor="agent:nobody")) == []


def test_ties_across_actors_go_to_the_newest_node(ledger: Any) -> None:
    store = store_for(ledger)
    oldest = run(store.create_node("Note", "same words", "identical body", BOB))
    middle = run(store.create_node("Note", "same words", "identical body", ALICE))
    newest = run(store.create_node("Note", "same words", "identical body", BOB))
    assert [h.node.id for h in run(store.search("identical"))] == [
        newest.id, middle.id, oldest.id]
    assert [h.node.id for h in run(store.search("identical", limit=2))] == [
        newest.id, middle.id]
    assert [h.node.id for h in run(store.search("identical", actor="agent:bob",
                                                limit=1))] == [newest.id]


def test_a_search_within_one_actor_and_kind_finds_only_those_nodes(ledger: Any) -> None:
    store = store_for(ledger)
    mine = run(store.create_node("Decision", "Cache policy", "evict by LRU", ALICE))
    run(store.create_node("Note", "Cache policy", "evict by LRU", ALICE))
    run(store.create_node("Decision", "Cache policy", "evict by LRU", BOB))
    assert [h.node.id for h in run(store.search("cache lru", kind="Decision",
                                                actor="agent:alice"))] == [mine.id]


WORDS = ["cache", "queue", "lock", "index", "shard", "replica", "vacuum", "latency"]
FILLER = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
SEQ_MASK = (1 << 40) - 1


def _every_match_ranked(raw: Raw, words: str, actor: str | None, limit: int) -> list[str]:
    """The top ``limit`` by ranking every match, as the ordering rules say."""
    if raw.pg:
        within = " AND m.actor = ?" if actor else ""
        rows = raw.query(
            "SELECT m.node_id FROM memory_search m, to_tsquery('english', ?) q "
            f"WHERE m.search @@ q{within} ORDER BY ts_rank('{{0, 0, 0.5, 1.0}}', m.search, q) "
            'DESC, m.created_at COLLATE "C" DESC, m.node_id COLLATE "C" DESC LIMIT ?',
            [" | ".join(words.split()), *([actor] if actor else []), limit])
    else:
        return [node_id for node_id, _ in _bm25_ranked(raw, words, actor)[:limit]]
    return [r[0] for r in rows]


def _bm25_ranked(raw: Raw, words: str, actor: str | None) -> list[tuple[str, float]]:
    """Every current node matching ``words`` as (id, score), ranked as the ordering
    rules say for SQLite, computed here from the nodes' text: BM25 with k1 = 1.2 and
    no length normalisation, a title word counting twice, idf as FTS5's (the
    test's words are their own stems, and unlike each other's)."""
    nodes = raw.query(
        "SELECT n.id, n.title, n.body, n.actor, n.created_at FROM memory_nodes n "
        "WHERE NOT EXISTS (SELECT 1 FROM memory_nodes s WHERE s.supersedes = n.id)")
    counts = [(node_id, who, at, {w: 2 * title.lower().split().count(w)
                                  + body.lower().split().count(w) for w in words.split()})
              for node_id, title, body, who, at in nodes]
    idf = {}
    for w in words.split():
        holding = sum(1 for *_, t in counts if t[w])
        idf[w] = max(math.log((len(nodes) - holding + 0.5) / (holding + 0.5)), 1e-6)
    scored = [(node_id, at, sum(idf[w] * 2.2 * t[w] / (t[w] + 1.2) for w in t if t[w]))
              for node_id, who, at, t in counts
              if any(t.values()) and (actor is None or who == actor)]
    scored.sort(key=lambda s: (s[1], s[0]), reverse=True)  # newer, then larger id, first
    scored.sort(key=lambda s: -round(s[2], 9))  # stable: relevance first
    return [(node_id, score) for node_id, _, score in scored]


def test_sqlite_scores_are_bm25_without_length_normalisation(ledger: Any, raw: Raw) -> None:
    if raw.pg:
        pytest.skip("SQLite's ranking")
    store = store_for(ledger)
    run(store.create_node("Note", "cache", "x", ALICE))  # the shortest node there can be
    run(store.create_node("Note", "lock", "cache cache cache " + "filler " * 200, ALICE))
    run(store.create_node("Note", "queue", "cache", ALICE))
    run(store.create_node("Note", "cache lock", "shard " * 40, BOB))
    for words in ("cache", "cache lock", "shard", "queue shard"):
        found = run(store.search(words))
        expected = _bm25_ranked(raw, words, None)
        assert [h.node.id for h in found] == [node_id for node_id, _ in expected], words
        for hit, (_, score) in zip(found, expected, strict=True):
            assert hit.score == pytest.approx(score, rel=1e-9), words


@pytest.mark.slow
def test_the_top_found_is_the_top_of_every_match_ranked(ledger: Any, raw: Raw) -> None:
    rng = random.Random(8)
    store = store_for(ledger)
    nodes = []
    for n in range(90):
        title = " ".join(rng.choices(WORDS + FILLER, k=rng.randint(1, 4)))
        body = " ".join(rng.choices(WORDS + FILLER * 3, k=rng.randint(4, 30)))
        nodes.append(run(store.create_node("Note", title, body, BOB if n % 3 else ALICE)))
    for node in nodes[::7]:
        run(store.supersede(node, node.title, node.body + " echo", ALICE))
    for words in ("cache", "queue lock", "index shard replica", "vacuum latency cache lock",
                  "golf", "hotel cache"):
        for limit in (1, 3, 10):
            for actor in ("agent:alice", "agent:bob", None):
                found = run(store.search(words, actor=actor, limit=limit))
                assert [h.node.id for h in found] == _every_match_ranked(
                    raw, words, actor, limit), (words, actor, limit)


def test_sqlite_weights_come_from_the_index_totals_and_default_when_there_are_none() -> None:
    from overt.memory.search_sql import sqlite_weights

    # 100 rows; 500, 5,000 and 1,200 tokens in title, body and tags: avgdl 67
    block = bytes([100, 0x83, 0x74, 0xA7, 0x08, 0x89, 0x30])
    title, body = sqlite_weights(block)
    scale = 1 - 0.75 + 0.75 * -3 / 67
    assert body == pytest.approx(scale) and title == pytest.approx(2 * scale)
    for unusable in (None, b"", bytes([0, 0, 0, 0]), bytes([5]), bytes([100, 0x83])):
        assert sqlite_weights(unusable) == (2.0, 1.0)  # empty, no rows, cut short
    assert sqlite_weights(bytes([100, 1, 1, 1])) == (2.0, 1.0)  # unpadded: no positive K
