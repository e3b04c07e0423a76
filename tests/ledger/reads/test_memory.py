"""The memory graph's tables read back, on both backends: revisions, chains, links,
search, and the entries and tools that recorded each write."""

from __future__ import annotations

from typing import Any

from overt.ledger.reads import memory, memory_provenance
from overt.memory.nodes import Hit, Node
from overt.memory.store import Writer, store_for
from tests.conftest import run
from tests.memory.test_provenance import planted

ME = Writer("agent:default", session_id="s1")
OTHER = Writer("agent:other")


def test_revisions_chains_and_links_are_read_back_as_written(ledger: Any) -> None:
    store = store_for(ledger)
    first = run(store.create_node("Entity", "Isokron", "The host in rack 4.", ME))
    second = run(store.supersede(first, "Isokron", "The host in rack 5.", ME))
    other = run(store.create_node("Note", "Kafka", "The event bus.", OTHER))
    link = run(store.create_link("runs_on", first.root_id, other.root_id, ME))
    retracted = run(store.create_link("mentions", other.root_id, first.root_id, OTHER))
    run(store.retract_link(retracted, OTHER))

    assert run(memory.node(ledger, first.id)) == first
    assert run(memory.node(ledger, "nowhere")) is None
    assert run(memory.current(ledger, first.root_id)) == second
    assert run(memory.currents(ledger, [first.root_id, other.root_id])) == {
        first.root_id: second, other.root_id: other}
    assert run(memory.currents(ledger, [])) == {}
    assert run(memory.revisions(ledger, first.root_id)) == [first, second]
    assert run(memory.written_in(ledger, session_id="s1")) == [first, second]
    assert run(memory.newest_nodes(ledger, 10)) == [other, second]
    assert run(memory.newest_nodes(ledger, 1)) == [other]
    found = run(memory.link(ledger, retracted.id))
    assert found is not None and found.retracted and found.kind == "mentions"
    assert run(memory.link(ledger, link.id)) == link
    assert run(memory.links_touching(ledger, [first.root_id])) == [link]
    assert run(memory.links_touching(ledger, [])) == []


def test_a_search_finds_current_revisions_by_word_prefix_and_inside_words(ledger: Any) -> None:
    store = store_for(ledger)
    first = run(store.create_node("Entity", "Isokron", "The host in rack 4.", ME))
    second = run(store.supersede(first, "Isokron", "The scheduling host in rack 5.", ME))
    other = run(store.create_node("Note", "Kafka", "The event bus.", OTHER))

    def found(query: str, **more: Any) -> list[str]:
        hits = run(memory.search(ledger, query, **more))
        assert all(isinstance(h, Hit) and isinstance(h.node, Node) for h in hits)
        return [h.node.id for h in hits]

    assert found("scheduling") == [second.id]  # the current revision only
    assert found("iso") == [second.id]  # a prefix
    assert found("kron") == [second.id]  # inside a word
    assert found("the") == []  # stop words only
    assert found("") == [other.id, second.id]  # the newest
    assert found("", actor=OTHER.actor) == [other.id]
    assert found("bus", kind="Entity") == []
    assert run(memory.search(ledger, "rack"))[0].score > 0


def test_the_entries_and_tools_that_recorded_each_write_are_found(ledger: Any) -> None:
    node_id, turns = planted(ledger)
    records = {e.data["node_id"]: e for e in run(ledger.entries(
        kinds=["node.created", "node.superseded"]))}
    calls = {e.turn_id: e.data["tool_call_id"] for e in run(ledger.entries(
        kinds=["tool_call.started"]))}
    written = run(memory_provenance.turn_writes(ledger, [t.turn_id for t in turns]))
    assert {(t, c) for t, c in written.tools} == {(t.turn_id, calls[t.turn_id]) for t in turns}
    assert sorted(written.tools.values()) == ["node_create", "node_supersede"]
    assert len(written.records) == 2
    for revision_id, recorded in written.records.items():
        assert (recorded.seq, recorded.at) == (records[revision_id].seq,
                                               records[revision_id].at)
    [script] = [n for n in run(memory.revisions(ledger, node_id)) if n.turn_id is None]
    recorded = run(memory_provenance.node_record(ledger, script.id))
    assert recorded is not None and recorded.seq == records[script.id].seq
    assert run(memory_provenance.node_record(ledger, "nowhere")) is None
    assert run(memory_provenance.direct_call_tools(ledger, ["no-such-call"])) == {}
    assert run(memory_provenance.turn_writes(ledger, [])) == ({}, {})
