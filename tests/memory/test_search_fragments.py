"""node_search finds fragments of words and ticket keys, on both backends, whatever is typed."""

from __future__ import annotations

from typing import Any

import pytest

from overt.memory.search_sql import fts5_term, may_be_prefix, words
from overt.memory.store import MemoryStore, Writer, store_for
from tests.conftest import run
from tests.memory.helpers import start_call

ME = Writer("agent:default", "01TURN", "cli:s1", "call-1", origin="tool")


@pytest.fixture
def store(ledger: Any) -> MemoryStore:
    start_call(ledger)  # ME's call: its writes are ones the chain shows it could make
    found = store_for(ledger)
    for kind, title, body in [
        ("Entity", "Isokron", "The scheduling host in rack 4."),
        ("Note", "Picking bug", "PICK-12 is the carton label misprint."),
        ("Note", "Another ticket", "PICK-123 tracks the scanner firmware."),
        ("Entity", "東京のサーバー", "本番のデータベースが動いている。"),
        ("Note", "Kafka", "The event bus."),
    ]:
        run(found.create_node(kind, title, body, ME))
    return found


def titles(store: MemoryStore, query: str) -> list[str]:
    return [hit.node.title for hit in run(store.search(query))]


def test_a_prefix_finds_the_word_it_begins(store: MemoryStore) -> None:
    assert titles(store, "Iso") == ["Isokron"]
    assert titles(store, "where is isokr?") == ["Isokron"]


def test_a_ticket_key_finds_its_node_and_not_a_longer_key(store: MemoryStore) -> None:
    assert titles(store, "PICK-12") == ["Picking bug"]
    assert titles(store, "what about pick-123") == ["Another ticket"]


def test_japanese_text_is_found_whole_and_by_its_beginning(store: MemoryStore) -> None:
    assert titles(store, "東京のサーバー") == ["東京のサーバー"]
    assert titles(store, "東京") == ["東京のサーバー"]


def test_a_two_letter_word_is_matched_whole_not_as_a_prefix(store: MemoryStore) -> None:
    assert titles(store, "ka") == []


def test_a_word_held_whole_ranks_before_the_words_it_is_inside(
        store: MemoryStore) -> None:
    run(store.create_node("Note", "Dates", "We write dates as ISO 8601.", ME))
    assert titles(store, "iso") == ["Dates", "Isokron"]
    assert titles(store, "isok") == ["Isokron"]
    (first,) = run(store.search("iso", limit=1))
    assert first.node.title == "Dates" and first.score > 0


def test_a_prefix_is_looked_for_within_the_actor_searched(store: MemoryStore) -> None:
    run(store.create_node("Note", "Other", "isotope counts", Writer("agent:other")))
    assert [h.node.title for h in run(store.search("iso", actor="agent:default"))] == [
        "Isokron"]


@pytest.mark.slow
@pytest.mark.parametrize("query", [
    '"', "*", "-", ":", "(", ")", "NEAR(iso pick)", "iso*", "iso:*", "'", "\\", "AND",
    "OR NOT", "^", "{title}: iso", "-12", ":*", "'':*", "a & b | !c", "<->", "pick-",
    "pick--12", "a.b.c.d:e/f_g", '"PICK-12" OR "x"', "NEAR", "title:iso", "iso NOT pick",
])
def test_query_syntax_typed_by_a_user_never_raises(store: MemoryStore, query: str) -> None:
    run(store.search(query))  # the assertion is that it returns


def test_terms_are_words_and_keys_and_fts5_sees_only_quoted_phrases() -> None:
    assert words('Iso "PICK-12" (NEAR) v2.3 -x* 東京') == ["iso", "pick-12", "near", "v2.3",
                                                          "x", "東京"]
    assert [may_be_prefix(t) for t in ("iso", "pick-12", "ka", "東京")] == [
        True, False, False, True]
    assert (fts5_term("iso", True), fts5_term("pick-12")) == ('"iso"*', '"pick-12"')
