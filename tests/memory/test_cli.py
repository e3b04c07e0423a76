"""``overt memory``: search, show, history and graph, on both backends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from overt.cli.main import main
from overt.memory.store import Node, Writer, store_for
from tests.conftest import run

ME = Writer("agent:default")


@pytest.fixture
def graph(ledger: Any) -> dict[str, Node]:
    store = store_for(ledger)
    decision = run(store.create_node("Decision", "Use WAL", "readers never block", ME))
    revised = run(store.supersede(decision, "Use WAL mode", "readers never block", ME))
    component = run(store.create_node("Component", "Ledger", "the audit store", ME))
    run(store.create_link("applies_to", decision.root_id, component.root_id, ME))
    return {"decision": decision, "revised": revised, "component": component}


def memory(url: str, *args: str) -> int:
    return main(["--db", url, "memory", *args])


@pytest.mark.slow
def test_memory_search_prints_matches_best_first(graph: dict[str, Node], ledger_url: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert memory(ledger_url, "search", "wal", "--json") == 0
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["id"] == graph["revised"].id and result["score"] > 0
    assert memory(ledger_url, "search", "ledger", "--kind", "Component") == 0
    assert "Ledger" in capsys.readouterr().out
    assert memory(ledger_url, "search", "nothing-like-this") == 0
    assert capsys.readouterr().out.strip() == "no matching nodes"
    assert memory(ledger_url, "search", "wal", "--limit", "51") == 2


def test_memory_search_refuses_a_kind_or_actor_it_cannot_mean(
        graph: dict[str, Node], ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # each was "no matching nodes", exit 0: a misspelling read as an empty memory
    assert memory(ledger_url, "search", "wal", "--kind", "Decisoin") == 2
    assert "unknown node kind 'Decisoin'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # an actor argument is checked as it is parsed
        memory(ledger_url, "search", "wal", "--actor", "agnet:default")
    assert refused.value.code == 2
    assert "unknown actor kind 'agnet'" in capsys.readouterr().err
    assert memory(ledger_url, "search", "wal", "--actor", "agent", "--json") == 0
    [result] = json.loads(capsys.readouterr().out)["results"]  # agent is agent:default
    assert result["id"] == graph["revised"].id


def test_memory_show_prints_the_current_revision(graph: dict[str, Node], ledger_url: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert memory(ledger_url, "show", graph["decision"].id) == 0
    out = capsys.readouterr().out
    assert "Decision: Use WAL mode" in out and "was superseded" in out
    assert memory(ledger_url, "show", "01NOPE") == 4


def test_memory_history_prints_every_revision_oldest_first(
    graph: dict[str, Node], ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert memory(ledger_url, "history", graph["revised"].id, "--json") == 0
    revisions = json.loads(capsys.readouterr().out)["revisions"]
    assert [r["title"] for r in revisions] == ["Use WAL", "Use WAL mode"]


def test_memory_graph_draws_dot_and_mermaid(graph: dict[str, Node], ledger_url: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    root, component = graph["decision"].root_id, graph["component"].root_id
    assert memory(ledger_url, "graph", "--format", "dot") == 0
    dot = capsys.readouterr().out
    assert dot.startswith("digraph memory {")
    assert f'"{root}" -> "{component}" [label="applies_to"];' in dot
    assert '[label="Decision: Use WAL mode"]' in dot
    assert memory(ledger_url, "graph", component, "--format", "mermaid") == 0
    mermaid = capsys.readouterr().out
    assert mermaid.startswith("flowchart LR")
    assert f"n{root} -->|applies_to| n{component}" in mermaid
