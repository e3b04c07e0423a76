from __future__ import annotations

import pytest

from overt.evals.names import identifiers, invented_names, proper_names


@pytest.mark.parametrize(("text", "found"), [
    ("Runs on cache-stg-2.internal:6380.", ["cache-stg-2.internal"]),
    ("Ticket OPS-2291 and gpt-4o-mini.", ["OPS-2291", "gpt-4o-mini"]),
    ("Mail ops@corp.example or see wiki.corp.example.net/start.",
     ["ops@corp.example", "wiki.corp.example.net/start"]),
    ("e.g. in the last 24h, at 3pm, the 2nd time, on 1.5B; $0.13.", []),
    ("ホストはdb-stg-3.internalです。", ["db-stg-3.internal"]),
    ("A follow-up on a read-only tool.", []),
])
def test_identifiers_are_hosts_keys_and_addresses_not_words_or_units(
        text: str, found: list[str]) -> None:
    assert identifiers(text) == found


@pytest.mark.parametrize(("text", "found"), [
    ("The match was won by Real Madrid.", ["Real Madrid"]),
    ("Dear Team,\nThe migration is done.\nBest Regards", []),
    ("Hello Tobias. Ask Mireille Dupont.", ["Mireille Dupont"]),
    ("I cannot. Please use Slack.", []),
])
def test_proper_names_are_runs_of_capitalised_words_past_a_sentences_start(
        text: str, found: list[str]) -> None:
    assert proper_names(text) == found


def test_a_name_is_grounded_by_a_source_without_regard_to_case_or_word_order() -> None:
    sources = ["Note: STAGING cache on Cache-Stg-2.Internal"]
    assert invented_names("The Staging Cache is on cache-stg-2.internal.", sources) == []
    assert invented_names("The Production Cache is on cache-stg-3.internal.", sources) == [
        "cache-stg-3.internal", "Production Cache"]
