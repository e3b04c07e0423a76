"""node_search finds text inside words through an index of trigrams, on both backends,
as the writer role on PostgreSQL too; word matches still rank first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.errors import MigrationError
from overt.ids import new_ulid
from overt.ledger import open_ledger
from overt.memory.search_sql import fragment_terms, fragments
from overt.memory.store import MemoryStore, Writer, store_for
from tests import backends
from tests.conftest import run

ME = Writer("agent:default")
OTHER = Writer("agent:other")


def fill(store: MemoryStore) -> MemoryStore:
    for kind, title, body in [
        ("Entity", "Isokron", "The scheduling host in rack 4."),
        ("Note", "Picking bug", "PICK-12 is the carton label misprint."),
        ("Entity", "東京のサーバー", "本番のデータベースが動いている。"),
        ("Note", "Kafka", "The event bus."),
    ]:
        run(store.create_node(kind, title, body, ME))
    return store


@pytest.fixture
def store(ledger: Any) -> MemoryStore:
    return fill(store_for(ledger))


def titles(store: MemoryStore, query: str, **kwargs: Any) -> list[str]:
    return [hit.node.title for hit in run(store.search(query, **kwargs))]


def test_a_fragment_inside_a_word_finds_it_whatever_its_case(store: MemoryStore) -> None:
    assert titles(store, "ick") == ["Picking bug"]
    assert titles(store, "kron") == ["Isokron"]
    assert titles(store, "where is SOKR?") == ["Isokron"]
    assert titles(store, "ISPRIN") == ["Picking bug"]  # in the body: "misprint"
    assert titles(store, "arton") == ["Picking bug"]


def test_japanese_without_spaces_is_found_by_any_three_characters_of_it(
    store: MemoryStore
) -> None:
    assert titles(store, "サーバー") == ["東京のサーバー"]
    assert titles(store, "京のサ") == ["東京のサーバー"]
    assert titles(store, "データベース") == ["東京のサーバー"]
    assert titles(store, "ベースが動") == ["東京のサーバー"]
    assert titles(store, "バー") == []  # two characters: no trigram to find them by


def test_word_matches_rank_first_then_text_inside_words_title_before_body(
    store: MemoryStore
) -> None:
    run(store.create_node("Note", "Kron jobs", "Nightly kron runs.", ME))
    run(store.create_node("Note", "Rack notes", "Vokron shares rack 4.", ME))
    hits = run(store.search("kron"))
    assert [h.node.title for h in hits] == ["Kron jobs", "Isokron", "Rack notes"]
    assert hits[0].score > 0 and [h.score for h in hits[1:]] == [0.0, 0.0]
    # words fill the places asked for: nothing inside words is looked for
    assert titles(store, "kron", limit=1) == ["Kron jobs"]
    assert titles(store, "kron", limit=2) == ["Kron jobs", "Isokron"]


def test_more_fragments_found_rank_higher_and_ties_go_to_the_newer(
    store: MemoryStore
) -> None:
    older = run(store.create_node("Note", "One", "the staging db", ME))
    newer = run(store.create_node("Note", "Two", "the staging db", ME))
    both = run(store.create_node("Note", "Three", "staging and scheduling", ME))
    found = [h.node.id for h in run(store.search("tagin hedul"))]
    # Three holds both fragments; Isokron ("scheduling") one; One and Two one each
    assert found[0] == both.id
    assert found.index(newer.id) < found.index(older.id)


def test_text_inside_words_keeps_the_actor_the_kind_and_current_revisions(
    store: MemoryStore
) -> None:
    run(store.create_node("Note", "Theirs", "isokronite samples", OTHER))
    assert titles(store, "okro", actor="agent:default") == ["Isokron"]
    assert titles(store, "okro", actor="agent:other") == ["Theirs"]
    assert titles(store, "okro", kind="Note") == ["Theirs"]
    run(store.create_node("Notebook", "Pad", "isokron pads", ME))  # a kind "Note" begins
    assert titles(store, "okro", kind="Note") == ["Theirs"]
    assert titles(store, "okro", kind="Notebook") == ["Pad"]
    (isokron,) = [h.node for h in run(store.search("okro", kind="Entity"))]
    run(store.supersede(isokron, "Isobar", "The scheduling host, renamed.", ME))
    assert titles(store, "okro", actor="agent:default") == ["Pad"]
    assert titles(store, "obar") == ["Isobar"]


def test_a_ticket_key_is_still_matched_as_a_key(store: MemoryStore) -> None:
    run(store.create_node("Note", "Another ticket", "PICK-123 tracks the scanner.", ME))
    assert titles(store, "PICK-12") == ["Picking bug"]
    assert fragment_terms(["pick-12", "ick", "ka", "東京の"]) == ["ick", "東京の"]


@pytest.mark.parametrize("query", ["%%%", "a%b_c", "50%", "_kron_", "\\kron", "k%o"])
def test_like_wildcards_typed_match_nothing_more(store: MemoryStore, query: str) -> None:
    hits = titles(store, query)
    assert hits in ([], ["Isokron"])  # "_kron_" is the word kron; "%" is never a wildcard
    assert hits == (["Isokron"] if "kron" in query else [])


def test_the_pattern_escapes_what_like_would_read() -> None:
    from overt.ledger.sql import POSTGRES

    _, params = fragments(POSTGRES, ["a%b_c\\"], kind=None, actor=None, limit=5,
                          columns="id")
    assert params[0] == "%a\\%b\\_c\\\\%"


# -- PostgreSQL: the writer role, and a server that lacks what is needed -------------


@pytest.fixture
def as_writer(tmp_path: Path) -> Iterator[str]:
    """A migrated PostgreSQL ledger with its roles set up: the writer's URL."""
    from overt.ledger.roles import setup_roles

    backends.require_pg()
    url = backends.new_url("postgres", tmp_path)
    suffix = new_ulid().lower()[-10:]
    owner, writer = f"overt_owner_{suffix}", f"overt_writer_{suffix}"
    open_ledger(url).close_sync()  # type: ignore[attr-defined]
    try:
        setup_roles(url, owner, writer)
        yield url.replace("postgresql://", f"postgresql://{writer}@", 1)
    finally:
        backends.drop(url)
        _drop_roles(writer, owner)


def _drop_roles(*roles: str) -> None:
    import psycopg

    with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
        for role in roles:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(f'DROP OWNED BY "{role}"')
                conn.execute(f'DROP ROLE "{role}"')


@pytest.mark.postgres
def test_the_writer_role_writes_and_finds_text_inside_words(as_writer: str) -> None:
    import psycopg

    from overt.ledger.pg_url import parse_url
    from overt.ledger.sql import POSTGRES

    ledger: Any = open_ledger(as_writer)
    try:
        store = fill(store_for(ledger))
        assert titles(store, "kron") == ["Isokron"]
        assert titles(store, "サーバー") == ["東京のサーバー"]
        statement, params = fragments(POSTGRES, ["kron"], kind=None, actor=ME.actor,
                                      limit=5, columns="id")
        conninfo, schema = parse_url(as_writer)
        with psycopg.connect(conninfo, autocommit=True) as conn:  # the index, as the writer
            conn.execute(f'SET search_path = "{schema}"')
            conn.execute("SET enable_seqscan = off")  # four rows: else a scan is cheaper
            plan = conn.execute("EXPLAIN " + statement, params).fetchall()
        assert any("Bitmap Index Scan on memory_trigrams_" in row[0] for row in plan), plan
        assert run(ledger.verify()).ok
    finally:
        ledger.close_sync()


@pytest.fixture
def fresh_database() -> Iterator[tuple[str, str]]:
    """A database of its own (pg_trgm not created in it), a role without CREATE on it,
    and a schema that role owns: (database URL, role)."""
    import psycopg

    backends.require_pg()
    suffix = new_ulid().lower()[-10:]
    database, role = f"overt_trgm_{suffix}", f"overt_nocreate_{suffix}"
    base = backends.PG_BASE.rsplit("/", 1)[0]
    with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        with psycopg.connect(f"{base}/{database}", autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA ledger AUTHORIZATION "{role}"')
            conn.execute(f'REVOKE CREATE ON DATABASE "{database}" FROM PUBLIC')
        yield f"{base}/{database}", role
    finally:
        with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.mark.postgres
def test_an_owner_who_may_not_create_pg_trgm_is_told_what_to_run_and_nothing_is_left(
    fresh_database: tuple[str, str]
) -> None:
    import psycopg

    url, role = fresh_database
    as_role = url.replace("postgresql://", f"postgresql://{role}@", 1) + "?schema=ledger"
    with pytest.raises(MigrationError) as refused:
        open_ledger(as_role)
    message = str(refused.value)
    assert "pg_trgm" in message and "CREATE EXTENSION pg_trgm" in message
    assert role in message
    with psycopg.connect(url, autocommit=True) as conn:
        # the baseline is one transaction: not applied, in part or whole
        assert not conn.execute("SELECT 1 FROM pg_tables WHERE schemaname = 'ledger'"
                                ).fetchone()
        assert not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = "
                                "'overt_extensions'").fetchone()
        conn.execute("CREATE EXTENSION pg_trgm")  # as the message says, by a superuser
    ledger: Any = open_ledger(as_role)
    try:
        fill(store_for(ledger))
        assert titles(store_for(ledger), "kron") == ["Isokron"]
    finally:
        ledger.close_sync()
