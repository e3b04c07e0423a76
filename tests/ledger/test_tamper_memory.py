"""The tamper matrix for the memory tables, on both backends: the agent reads them as
its memory, and each row is recorded by an entry of the chain, so a row changed,
deleted or inserted behind the ledger's back makes ``overt ledger verify`` exit 3,
naming the row and the entry (see :mod:`overt.ledger.memory_check`)."""

from __future__ import annotations

from typing import Any

import pytest

from overt.cli.main import main
from overt.clock import now_iso
from overt.memory.store import MemoryStore, Writer, store_for
from tests.backends import Raw
from tests.conftest import run
from tests.memory.helpers import start_call

EXIT_VERIFY = 3
ME = Writer("agent:default", "01TURN", "cli:s1", "call-1", origin="tool")
NODE_COLUMNS = ("id, kind, title, body, actor, created_at, supersedes, root_id, revision, "
                "turn_id, search_tags")


@pytest.fixture
def store(ledger: Any) -> MemoryStore:
    start_call(ledger)  # ME's call: its writes are ones the chain shows it could make
    return store_for(ledger)


def verify_exit(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--db", ledger_url, "ledger", "verify"])
    return code, capsys.readouterr().out


def seq_of(raw: Raw, kind: str) -> int:
    return int(raw.query(f"SELECT seq FROM audit_log WHERE kind = '{kind}'")[0][0])


def a_graph(store: MemoryStore) -> tuple[Any, Any, Any]:
    """Two nodes (the first superseded once) and a retracted link between them."""
    first = run(store.create_node("Note", "Staging db host", "staging db is db-stg-1", ME))
    second = run(store.supersede(first, "Staging db host", "staging db is db-stg-2", ME))
    other = run(store.create_node("Note", "Prod db host", "prod db is db-prd-1", ME))
    link = run(store.create_link("relates_to", first.id, other.id, ME))
    run(store.retract_link(link, ME))
    return first, second, link


def test_an_untouched_memory_graph_verifies_with_exit_0(
    store: MemoryStore, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a_graph(store)
    assert verify_exit(ledger_url, capsys)[0] == 0


@pytest.mark.slow
@pytest.mark.parametrize(("column", "value"), [
    ("body", "staging db is evil-host"), ("title", "Prod db host"),
    ("actor", "operator:default"), ("kind", "Decision"), ("turn_id", "01OTHERTURN"),
    ("search_tags", "note nobody")])
def test_change_a_node_is_refused_and_detected_without_the_guard(
    store: MemoryStore, raw: Raw, ledger_url: str, capsys: pytest.CaptureFixture[str],
    column: str, value: str
) -> None:
    _, second, _ = a_graph(store)
    statement = f"UPDATE memory_nodes SET {column} = ? WHERE id = ?"
    with pytest.raises(raw.append_only_error):
        raw.execute(statement, (value, second.id))
    raw.drop_guards().execute(statement, (value, second.id))
    code, out = verify_exit(ledger_url, capsys)
    seq = seq_of(raw, "node.superseded")
    assert code == EXIT_VERIFY, out
    assert (f"the memory node {second.id} does not match entry {seq} (node.superseded)"
            in out), out


def test_insert_a_forged_node_is_detected(
    store: MemoryStore, raw: Raw, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _, _ = a_graph(store)
    # INSERT is what every writer may do: a "memory" the agent would read and trust
    raw.execute(f"INSERT INTO memory_nodes ({NODE_COLUMNS}) SELECT '01FORGEDNODE0000000000000A', "
                "kind, title, 'staging db is evil-host', actor, created_at, NULL, "
                "'01FORGEDNODE0000000000000A', 1, turn_id, search_tags FROM memory_nodes "
                "WHERE id = ?", (first.id,))
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY
    assert "the memory node 01FORGEDNODE0000000000000A is in the memory tables but on no " \
           "entry of the chain" in out, out


def test_insert_a_forged_revision_is_detected(
    store: MemoryStore, raw: Raw, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, second, _ = a_graph(store)
    raw.execute(f"INSERT INTO memory_nodes ({NODE_COLUMNS}) SELECT '01FORGEDNODE0000000000000B', "
                "kind, title, 'staging db is evil-host', actor, created_at, id, root_id, 3, "
                "turn_id, search_tags FROM memory_nodes WHERE id = ?", (second.id,))
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "01FORGEDNODE0000000000000B" in out, out


def test_delete_a_node_is_refused_and_detected_without_the_guard(
    store: MemoryStore, raw: Raw, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, second, _ = a_graph(store)
    statement = "DELETE FROM memory_nodes WHERE id = ?"
    with pytest.raises(raw.append_only_error):
        raw.execute(statement, (second.id,))
    raw.drop_guards().execute(statement, (second.id,))
    code, out = verify_exit(ledger_url, capsys)
    seq = seq_of(raw, "node.superseded")
    assert code == EXIT_VERIFY
    assert (f"entry {seq} (node.superseded) records the memory node {second.id}, which is "
            "gone") in out, out


@pytest.mark.slow
@pytest.mark.parametrize("statement", [
    "UPDATE memory_links SET to_id = from_id", "DELETE FROM memory_links",
    "UPDATE memory_link_retractions SET actor = 'operator:x'",
    "DELETE FROM memory_link_retractions"])
def test_change_or_delete_a_link_or_its_retraction_is_detected(
    store: MemoryStore, raw: Raw, ledger_url: str, capsys: pytest.CaptureFixture[str],
    statement: str
) -> None:
    _, _, link = a_graph(store)
    with pytest.raises(raw.append_only_error):
        raw.execute(statement)
    raw.drop_guards().execute(statement)
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and f"memory link {link.id}" in out, out


def test_insert_a_forged_link_is_detected(
    store: MemoryStore, raw: Raw, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a_graph(store)
    raw.execute("INSERT INTO memory_links (id, kind, from_id, to_id, actor, created_at, turn_id) "
                "SELECT '01FORGEDLINK0000000000000A', kind, to_id, from_id, actor, created_at, "
                "turn_id FROM memory_links")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "memory link 01FORGEDLINK0000000000000A" in out, out


def test_a_node_whose_entry_a_recorded_prune_removed_still_verifies(
    store: MemoryStore, ledger: Any, raw: Raw
) -> None:
    a_graph(store)
    record = run(ledger.prune(now_iso()))
    assert record.removed_entries > 0 and not raw.query(
        "SELECT 1 FROM audit_log WHERE kind = 'node.created'")
    late = run(store.create_node("Note", "later", "after the prune", ME))
    report = run(ledger.verify())
    assert report.ok, report.problem
    # a row inserted after the prune is not accounted for by it
    raw.execute(f"INSERT INTO memory_nodes ({NODE_COLUMNS}) SELECT '01FORGEDNODE0000000000000C', "
                "kind, title, body, actor, created_at, NULL, '01FORGEDNODE0000000000000C', 1, "
                "turn_id, search_tags FROM memory_nodes WHERE id = ?", (late.id,))
    report = run(ledger.verify())
    assert not report.ok and report.memory_bad and "01FORGEDNODE0000000000000C" in (
        report.problem or "")


def test_verify_without_the_index_check_leaves_the_memory_tables_alone(
    store: MemoryStore, ledger: Any, raw: Raw
) -> None:
    _, second, _ = a_graph(store)
    raw.drop_guards().execute("DELETE FROM memory_nodes WHERE id = ?", (second.id,))
    assert run(ledger.verify(check_index=False)).ok
    assert not run(ledger.verify()).ok
