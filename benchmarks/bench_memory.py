"""``node_search`` latency over 100,000 memory nodes, on each backend.

Targets: p95 under 5 ms on SQLite, under 10 ms on PostgreSQL.

The nodes are bulk-loaded straight into the memory tables (executemany on
SQLite, COPY on PostgreSQL), not through 100,000 tool calls: the search is
what is timed. The search index is left as the schema's triggers build it, as
a store that grows one node at a time has it: no FTS5 'optimize' (the runtime
never runs one; loading in one transaction leaves the same segments as 100,000
single inserts), and the GIN indexes take rows directly (no pending list).
PostgreSQL's tables are vacuumed and analysed once loaded, as autovacuum would.

The corpus is synthetic but shaped like a real one: words drawn from a
Zipf-distributed vocabulary of 6,000 content words (Zipf from rank 60 on, as
if the stop words, which the search drops, were taken out), titles of 3-8
words and bodies of 20-80, four actors, the 18 node kinds, and one node in
ten superseded by a newer revision (only current revisions are searched).
Each query is 1-3 words drawn the same way (so some match thousands of nodes,
some a handful), searched within one actor's memory as ``node_search`` does by
default, a kind filter on one query in four, limit 10. A second set asks for text
inside words: 1-2 fragments of 3-5 letters cut from inside words drawn the same
way (never a word's beginning), which only the index of trigrams finds once the
word matches leave room; it is reported on its own line, with the same targets.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._pg import PG, scratch_schema, unreachable
from benchmarks._stats import percentile, row
from overt.ledger import open_ledger
from overt.memory.kinds import BUILTIN_NODE_KINDS
from overt.memory.search_sql import tags
from overt.memory.store import store_for

NODES = 100_000
SUPERSEDED_EVERY = 10
STOP_RANKS = 60
SEARCHES = 200
WARMUP = 20
ACTORS = ("agent:default", "agent:support", "agent:ops", "mcp_client:claude-code")
COLUMNS = ("id", "kind", "title", "body", "actor", "created_at", "supersedes", "root_id",
           "revision", "turn_id", "search_tags")


def _vocabulary(rng: random.Random, size: int = 6_000) -> list[str]:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(consonants) + rng.choice(vowels)
                          for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _corpus(seed: int = 8) -> tuple[list[tuple[Any, ...]], list[str], list[float]]:
    """(rows for memory_nodes, vocabulary, Zipf weights)."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    # Zipf from rank 60 on: the ~60 most frequent English words are stop words, which
    # the search drops; what is left is the long tail of content words.
    weights = [1 / (rank + STOP_RANKS) for rank in range(len(vocab))]
    cumulative = list(_accumulate(weights))

    def text(low: int, high: int) -> str:
        return " ".join(rng.choices(vocab, cum_weights=cumulative, k=rng.randint(low, high)))

    rows: list[tuple[Any, ...]] = []
    current: list[int] = []
    for n in range(NODES):
        node_id = f"N{n:025d}"
        at = f"2025-01-01T00:00:00.{n:06d}Z"
        if n % SUPERSEDED_EVERY == SUPERSEDED_EVERY - 1 and current:
            previous = rows[current.pop(rng.randrange(len(current)))]
            rows.append((node_id, previous[1], text(3, 8), text(20, 80), previous[4], at,
                         previous[0], previous[7], previous[8] + 1, None, previous[10]))
        else:
            kind, actor = rng.choice(BUILTIN_NODE_KINDS), rng.choice(ACTORS)
            rows.append((node_id, kind, text(3, 8), text(20, 80), actor, at, None, node_id, 1,
                         None, tags(kind, actor)))
        current.append(n)
    return rows, vocab, cumulative


def _accumulate(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


def _queries(vocab: list[str], cumulative: list[float]) -> list[dict[str, Any]]:
    rng = random.Random(88)
    return [{"query": " ".join(rng.choices(vocab, cum_weights=cumulative,
                                           k=rng.randint(1, 3))),
             "kind": rng.choice(BUILTIN_NODE_KINDS) if i % 4 == 0 else None,
             "actor": rng.choice(ACTORS)} for i in range(SEARCHES + WARMUP)]


def _fragment_queries(vocab: list[str], cumulative: list[float]) -> list[dict[str, Any]]:
    rng = random.Random(89)

    def inside(word: str) -> str:
        size = min(rng.randint(3, 5), len(word) - 1)
        start = rng.randint(1, len(word) - size)
        return word[start:start + size]

    return [{"query": " ".join(inside(w) for w in rng.choices(
                vocab, cum_weights=cumulative, k=rng.randint(1, 2))),
             "kind": rng.choice(BUILTIN_NODE_KINDS) if i % 4 == 0 else None,
             "actor": rng.choice(ACTORS)} for i in range(SEARCHES + WARMUP)]


def _load_sqlite(path: str, rows: list[tuple[Any, ...]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(f"INSERT INTO memory_nodes ({', '.join(COLUMNS)}) VALUES "
                     f"({', '.join('?' * len(COLUMNS))})", rows)
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


def _load_postgres(schema: str, rows: list[tuple[Any, ...]]) -> None:
    import psycopg

    with psycopg.connect(PG, options=f"-c search_path={schema}") as conn:
        with conn.cursor() as cur, cur.copy(
                f"COPY memory_nodes ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE memory_nodes")
        conn.execute("VACUUM ANALYZE memory_search")


def _time(ledger: Any, queries: list[dict[str, Any]]) -> tuple[list[float], int]:
    """Search latencies in ms (after a warm-up) and how many results came back in all."""
    store = store_for(ledger)

    async def go() -> tuple[list[float], int]:
        samples, found = [], 0
        for i, q in enumerate(queries):
            start = time.perf_counter()
            hits = await store.search(q["query"], kind=q["kind"], actor=q["actor"], limit=10)
            elapsed = (time.perf_counter() - start) * 1000
            if i >= WARMUP:
                samples.append(elapsed)
                found += len(hits)
        return samples, found

    return asyncio.run(go())


def _report(label: str, samples: list[float], found: int, target_ms: float) -> dict[str, float]:
    p50, p95 = percentile(samples, 0.5), percentile(samples, 0.95)
    verdict = "ok" if p95 < target_ms else "MISSED"
    row(f"{label}: node_search over {NODES:,} nodes",
        f"p50 {p50:6.2f} ms   p95 {p95:6.2f} ms   max {max(samples):6.2f} ms   "
        f"(target p95 < {target_ms:g} ms: {verdict}; {found / len(samples):.1f} results/query)")
    return {"p50_ms": p50, "p95_ms": p95}


def main() -> dict[str, float]:
    print("memory search")
    rows, vocab, cumulative = _corpus()
    queries = _queries(vocab, cumulative)
    inside = _fragment_queries(vocab, cumulative)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "memory.db")
        ledger: Any = open_ledger(path)
        started = time.perf_counter()
        _load_sqlite(path, rows)
        loaded = time.perf_counter() - started
        samples, found = _time(ledger, queries)
        fragment_samples, fragments_found = _time(ledger, inside)
        ledger.close_sync()
    result = _report("SQLite", samples, found, 5.0)
    figures.update({f"sqlite_{k}": v for k, v in result.items()})
    result = _report("SQLite, text inside words", fragment_samples, fragments_found, 5.0)
    figures.update({f"sqlite_inside_{k}": v for k, v in result.items()})
    row("  (bulk load with FTS5 indexes: words, trigrams)", f"{loaded:6.1f} s")

    if (why := unreachable()) is not None:
        row("PostgreSQL", f"skipped: {why}")
        return figures
    with scratch_schema("memory") as (url, schema):
        ledger = open_ledger(url)
        started = time.perf_counter()
        _load_postgres(schema, rows)
        loaded = time.perf_counter() - started
        samples, found = _time(ledger, queries)
        fragment_samples, fragments_found = _time(ledger, inside)
        ledger.close_sync()
    result = _report("PostgreSQL", samples, found, 10.0)
    figures.update({f"pg_{k}": v for k, v in result.items()})
    result = _report("PostgreSQL, text inside words", fragment_samples, fragments_found, 10.0)
    figures.update({f"pg_inside_{k}": v for k, v in result.items()})
    row("  (bulk load with tsvector + GIN, trigrams + GIN)", f"{loaded:6.1f} s")
    return figures


if __name__ == "__main__":
    main()
