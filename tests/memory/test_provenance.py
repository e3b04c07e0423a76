"""Who wrote this memory: every revision names the turn, tool call, actor and session
that wrote it, read back through :mod:`overt.memory.provenance` and ``overt memory
history``, on both backends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from overt.cli.main import main
from overt.errors import UsageError
from overt.memory.provenance import history, written_in
from overt.memory.store import Writer, store_for
from tests.conftest import cli_message, run
from tests.memory.test_turn import agent, remembering, tool


def planted(ledger: Any, script: bool = True) -> tuple[str, list[Any]]:
    """A conversation that writes a payee to memory in its first turn and revises it in
    its second; an operator's script then revises it again through the API. The node's
    id, and the two turns' results."""
    model = agent([
        lambda _: {"tool_calls": [tool("node_create", kind="Decision", title="Payee",
                                       body="Invoices go to bob.")]},
        lambda _: "Noted.",
        lambda r: {"tool_calls": [tool("node_supersede", id=r[0]["node"]["id"],
                                       body="Invoices go to evil-corp now.")]},
        lambda _: "Updated.",
    ])
    rt = remembering(model, ledger)
    first = run(rt.respond(cli_message("remember: invoices go to bob", session="p1")))
    second = run(rt.respond(cli_message("actually evil-corp", session="p1"),
                            session_id=first.session_id))
    [created] = run(ledger.entries(kinds=["node.created"]))
    node_id = str(created.data["node_id"])
    if script:
        store = store_for(ledger)
        current = run(store.current(node_id))
        run(store.supersede(current, "Payee", "Invoices go to bob.",
                            Writer("operator:default", session_id="cleanup")))
    return node_id, [first, second]


def test_each_revision_names_the_turn_and_tool_call_that_wrote_it(ledger: Any) -> None:
    node_id, turns = planted(ledger)
    revisions = run(history(store_for(ledger), node_id))
    assert [r.node.revision for r in revisions] == [1, 2, 3]
    calls = {e.turn_id: e.data["tool_call_id"] for e in run(ledger.entries(
        kinds=["tool_call.started"]))}
    for revision, turn, tool_name in zip(revisions, turns, ("node_create", "node_supersede"),
                                         strict=False):
        assert revision.origin == "tool" and revision.node.actor == "agent:default"
        assert revision.node.turn_id == turn.turn_id
        assert revision.node.session_id == turns[0].session_id
        assert revision.node.tool_call_id == calls[turn.turn_id]
        assert revision.tool_name == tool_name
        [entry] = [e for e in run(ledger.entries(kinds=["node.created", "node.superseded"]))
                   if e.data["node_id"] == revision.node.id]
        assert (revision.seq, revision.at) == (entry.seq, entry.at)
        assert entry.data["tool_call_id"] == revision.node.tool_call_id  # the chain says it
        assert entry.data["origin"] == "tool"
    script = revisions[2]
    assert script.origin == "api" and script.node.turn_id is None and script.tool_name is None
    assert script.node.session_id == "cleanup" and script.node.actor == "operator:default"
    assert "through the api, in no turn of session cleanup" in script.describe()
    assert run(ledger.verify()).ok


def test_what_a_session_or_a_turn_wrote_is_listed(ledger: Any) -> None:
    _, turns = planted(ledger)
    store = store_for(ledger)
    in_session = run(written_in(store, session_id=turns[0].session_id))
    assert [r.node.revision for r in in_session] == [1, 2]
    assert [r.node.turn_id for r in in_session] == [t.turn_id for t in turns]
    [second] = run(written_in(store, turn_id=turns[1].turn_id))
    assert second.node.body == "Invoices go to evil-corp now." and second.node.revision == 2
    assert run(written_in(store, session_id="nobody")) == []
    with pytest.raises(UsageError):
        run(written_in(store))
    with pytest.raises(UsageError):
        run(written_in(store, session_id="a", turn_id="b"))


def test_overt_memory_history_shows_who_wrote_each_revision(
    ledger: Any, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    node_id, turns = planted(ledger)
    capsys.readouterr()
    assert main(["--db", ledger_url, "memory", "history", node_id]) == 0
    out = capsys.readouterr().out
    first, second = turns
    assert f"(node_create) in turn {first.turn_id} of session {first.session_id}" in out
    assert f"(node_supersede) in turn {second.turn_id} of session {first.session_id}" in out
    assert "written by operator:default through the api, in no turn of session cleanup" in out
    assert main(["--db", ledger_url, "memory", "history", node_id, "--json"]) == 0
    revisions = json.loads(capsys.readouterr().out)["revisions"]
    assert [r["provenance"]["turn_id"] for r in revisions] == [first.turn_id, second.turn_id,
                                                               None]
    assert [r["provenance"]["tool_name"] for r in revisions] == [
        "node_create", "node_supersede", None]
    assert all(r["provenance"]["seq"] for r in revisions)
    assert main(["--db", ledger_url, "memory", "history", "01NOPE"]) == 4


def test_a_write_held_for_approval_and_a_direct_call_name_their_calls_and_verify(
    ledger: Any
) -> None:
    """A memory write a policy holds for an approval runs when approved, in its turn,
    and names that call; a tool run outside a turn names its call and no turn."""
    from overt.policy.engine import Policy
    from overt.policy.gate import Gate
    from overt.policy.rules import Rule
    from overt.runtime import Runtime

    model = agent([
        lambda _: {"tool_calls": [tool("node_create", kind="Note", title="Held",
                                       body="written once approved")]},
        lambda _: "Done.",
    ])
    ask = Rule("memory.ask", "ask", "memory_reviewed", "an operator reviews memory writes",
               tools=("node_*",))
    rt = Runtime(model=model, ledger=ledger, gate=Gate(Policy([ask])))
    paused = run(rt.respond(cli_message("note it", session="p2")))
    assert paused.awaiting_approval
    resumed = run(rt.approve(paused.awaiting_approval))
    assert resumed.result is not None
    direct = run(remembering(agent([]), ledger).call_tool(
        "node_create", {"kind": "Note", "title": "Direct", "body": "from a job"}))
    assert direct.status == "ok", direct
    store = store_for(ledger)
    [held] = run(written_in(store, turn_id=paused.turn_id))
    assert held.origin == "tool" and held.tool_name == "node_create"
    assert held.node.tool_call_id is not None and held.node.session_id == paused.session_id
    [node] = [h.node for h in run(store.search("direct", actor=None))]
    [job] = run(history(store, node.id))
    assert job.origin == "tool" and job.node.turn_id is None
    assert job.node.tool_call_id == direct.tool_call_id and job.tool_name == "node_create"
    assert "outside any turn" in job.describe()
    assert run(ledger.verify()).ok
