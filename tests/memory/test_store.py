"""The memory tables on both backends: append-only, revision chains, search ordering."""

from __future__ import annotations

from typing import Any

import pytest

from overt.errors import LedgerError
from overt.ledger.canonical import digest_text
from overt.memory.graph import verify_chain
from overt.memory.store import MemoryStore, Writer, store_for
from tests.backends import Raw
from tests.conftest import run
from tests.memory.helpers import start_call

ME = Writer("agent:default", "01TURN", "cli:s1", "call-1", origin="tool")


@pytest.fixture
def store(ledger: Any) -> MemoryStore:
    start_call(ledger)  # ME's call: its writes are ones the chain shows it could make
    return store_for(ledger)


def test_a_node_and_its_record_are_written_together_with_digests_only_in_the_chain(
    store: MemoryStore, ledger: Any, raw: Raw
) -> None:
    node = run(store.create_node("Decision", "Use SQLite", "secret-body-text", ME))
    [entry] = run(ledger.entries(kinds=["node.created"]))
    assert entry.data["node_id"] == node.id and entry.data["node_kind"] == "Decision"
    assert entry.data["body_digest"] == digest_text("secret-body-text")
    assert entry.turn_id == "01TURN" and entry.data["tool_call_id"] == "call-1"
    assert all("secret-body-text" not in str(row) for row in raw.query("SELECT * FROM audit_log"))
    assert raw.query("SELECT title, body, actor FROM memory_nodes") == [
        ("Use SQLite", "secret-body-text", "agent:default")]
    assert run(ledger.verify()).ok


def test_update_of_a_node_is_rejected_by_the_database(store: MemoryStore, raw: Raw) -> None:
    node = run(store.create_node("Note", "title", "body", ME))
    with pytest.raises(raw.append_only_error):
        raw.execute("UPDATE memory_nodes SET body = 'changed' WHERE id = ?", (node.id,))
    with pytest.raises(raw.append_only_error):
        raw.execute("DELETE FROM memory_nodes WHERE id = ?", (node.id,))
    assert raw.query("SELECT body FROM memory_nodes") == [("body",)]


def test_links_and_retractions_cannot_be_updated_or_deleted(store: MemoryStore,
                                                             raw: Raw) -> None:
    a = run(store.create_node("Ticket", "a", "a", ME))
    b = run(store.create_node("Ticket", "b", "b", ME))
    link = run(store.create_link("blocks", a.root_id, b.root_id, ME))
    run(store.retract_link(link, ME))
    for statement in ("UPDATE memory_links SET kind = 'relates_to'", "DELETE FROM memory_links",
                      "UPDATE memory_link_retractions SET actor = 'x'",
                      "DELETE FROM memory_link_retractions"):
        with pytest.raises(raw.append_only_error):
            raw.execute(statement)


def test_a_supersede_chain_of_three_reads_back_in_order(store: MemoryStore, ledger: Any) -> None:
    first = run(store.create_node("Convention", "v1", "one", ME))
    second = run(store.supersede(first, "v2", "two", ME))
    third = run(store.supersede(second, "v3", "three", ME))
    history = run(store.history(first.root_id))
    assert [n.title for n in history] == ["v1", "v2", "v3"]
    assert [n.revision for n in history] == [1, 2, 3]
    assert [n.supersedes for n in history] == [None, first.id, second.id]
    assert {n.kind for n in history} == {"Convention"}
    assert verify_chain(history)
    assert run(store.current(first.root_id)) == third
    events = run(ledger.entries(kinds=["node.superseded"]))
    assert [(e.data["supersedes"], e.data["revision"]) for e in events] == [
        (first.id, 2), (second.id, 3)]


def test_a_revision_superseded_twice_is_refused_by_the_database_and_nothing_is_recorded(
    store: MemoryStore, ledger: Any
) -> None:
    first = run(store.create_node("Note", "v1", "one", ME))
    run(store.supersede(first, "v2", "two", ME))
    before = len(run(ledger.entries()))
    with pytest.raises(LedgerError):
        run(store.supersede(first, "fork", "fork", ME))
    assert len(run(ledger.entries())) == before
    assert [n.title for n in run(store.history(first.root_id))] == ["v1", "v2"]


CORPUS = [
    ("Decision", "Cache eviction policy", "We evict cache entries by LRU; cache eviction runs "
                                          "every minute."),
    ("Gotcha", "Eviction storms", "Too many evictions at once stall the workers."),
    ("Note", "Deploy checklist", "Warm the cache before switching traffic."),
    ("Note", "Lunch order", "Pizza on Fridays."),
    ("Component", "Billing service", "Charges customers monthly."),
]


def _load(store: MemoryStore) -> dict[str, str]:
    return {title: run(store.create_node(kind, title, body, ME)).id
            for kind, title, body in CORPUS}


def test_search_ranks_a_fixed_corpus_by_relevance(store: MemoryStore) -> None:
    ids = _load(store)
    hits = run(store.search("cache eviction"))
    assert [h.node.title for h in hits] == [
        "Cache eviction policy", "Eviction storms", "Deploy checklist"]
    assert hits[0].score > hits[1].score > hits[2].score > 0
    assert run(store.search("evictions"))[0].node.id == ids["Cache eviction policy"]


def test_search_filters_by_kind_and_actor(store: MemoryStore) -> None:
    _load(store)
    run(store.create_node("Note", "Cache sizing", "cache of 2 GiB", Writer("agent:other")))
    assert [h.node.title for h in run(store.search("cache", kind="Note",
                                                    actor="agent:default"))] == [
        "Deploy checklist"]
    assert {h.node.actor for h in run(store.search("cache"))} == {"agent:default", "agent:other"}


def test_search_ties_go_to_the_newest_node(store: MemoryStore) -> None:
    older = run(store.create_node("Note", "same words", "identical body", ME))
    newer = run(store.create_node("Note", "same words", "identical body", ME))
    assert [h.node.id for h in run(store.search("identical"))] == [newer.id, older.id]


def test_search_finds_only_current_revisions(store: MemoryStore) -> None:
    first = run(store.create_node("Decision", "Pick a queue", "We use RabbitMQ.", ME))
    second = run(store.supersede(first, "Pick a queue", "We use Kafka.", ME))
    assert run(store.search("rabbitmq")) == []
    assert [h.node.id for h in run(store.search("kafka"))] == [second.id]
    assert [h.node.id for h in run(store.search("queue"))] == [second.id]


def test_search_without_words_lists_the_newest_nodes(store: MemoryStore) -> None:
    _load(store)
    assert [h.node.title for h in run(store.search("", limit=2))] == [
        "Billing service", "Lunch order"]
    assert run(store.search("the of and")) == []  # stop words only: nothing to match


def test_search_tolerates_query_syntax_characters(store: MemoryStore) -> None:
    _load(store)
    hits = run(store.search('cache" OR (eviction* AND NOT -"x" :'))
    assert hits and hits[0].node.title == "Cache eviction policy"


def test_retracted_links_leave_the_graph_but_stay_on_record(store: MemoryStore,
                                                            ledger: Any) -> None:
    a = run(store.create_node("Component", "api", "the api", ME))
    b = run(store.create_node("Project", "overt", "the project", ME))
    link = run(store.create_link("part_of", a.root_id, b.root_id, ME))
    assert run(store.links_touching([b.root_id])) == [link]
    run(store.retract_link(link, ME))
    assert run(store.links_touching([a.root_id])) == []
    assert run(store.link(link.id)).retracted  # type: ignore[union-attr]
    with pytest.raises(LedgerError):
        run(store.retract_link(link, ME))
    assert [e.kind for e in run(ledger.entries(kinds=["link.created", "link.retracted"]))] == [
        "link.created", "link.retracted"]
