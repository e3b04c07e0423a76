"""A session's evidence bundle carries the memory its turns wrote, on both backends:
each revision's title and body under its entry's digests (or withheld), each write
naming the tool call of its turn that made it; ``overt check-bundle`` lists them, and
a memory body changed in the bundle fails both verifiers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overt.ledger import bundle
from overt.memory.provenance import written_in
from overt.memory.store import store_for
from tests.conftest import cli_message, run
from tests.ledger.bundle_helpers import Operator, load
from tests.ledger.test_roles import roles  # noqa: F401 (a fixture)
from tests.memory.test_turn import agent, remembering, tool


@pytest.fixture
def op(ledger: Any, ledger_url: str, tmp_path: Path,
       capsys: pytest.CaptureFixture[str]) -> Operator:
    return Operator(ledger_url, tmp_path, capsys)


def planting(ledger: Any) -> str:
    """A session whose first turn writes two nodes and links them, and whose second
    revises one and retracts the link. Its id."""
    model = agent([
        lambda _: {"tool_calls": [
            tool("node_create", kind="Decision", title="Payee", body="Invoices go to bob."),
            tool("node_create", kind="Component", title="Billing", body="Sends invoices.")]},
        lambda r: {"tool_calls": [tool("link_create", kind="applies_to",
                                       from_id=r[0]["node"]["id"], to_id=r[1]["node"]["id"])]},
        lambda _: "Noted.",
        lambda r: {"tool_calls": [
            tool("node_supersede", id=r[0]["node"]["id"],
                 body="Invoices go to evil-corp, «urgent»."),
            tool("link_retract", id=r[2]["link"]["id"])]},
        lambda _: "Updated.",
    ])
    rt = remembering(model, ledger)
    first = run(rt.respond(cli_message("remember the payee", session="b1")))
    second = run(rt.respond(cli_message("the payee changed", session="b1"),
                            session_id=first.session_id))
    assert first.error is None and second.error is None
    return str(first.session_id)


def _entries(made: dict[str, Any], *kinds: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(e, json.loads(e["data"])) for e in made["entries"] if e["kind"] in kinds]


@pytest.mark.slow
def test_a_session_bundle_holds_the_memory_it_wrote_and_who_wrote_it(
    ledger: Any, op: Operator
) -> None:
    sid = planting(ledger)
    path = op.export("session.json", "--session", sid)
    code, out = op.check(path)
    assert code == 0, out
    made = load(path)
    revisions = run(written_in(store_for(ledger), session_id=sid))
    assert [r.node.revision for r in revisions] == [1, 1, 2]
    written = _entries(made, "node.created", "node.superseded")
    started = {(e["turn_id"], d["tool_call_id"]): d["tool_name"]
               for e, d in _entries(made, "tool_call.started")}
    for revision in revisions:
        [(entry, data)] = [(e, d) for e, d in written if d["node_id"] == revision.node.id]
        # the text as the memory table holds it, under the digests the chain signed
        assert made["bodies"][data["title_digest"]] == revision.node.title
        assert made["bodies"][data["body_digest"]] == revision.node.body
        # the call that wrote it is one of the same turn, in the bundle
        assert entry["turn_id"] == revision.node.turn_id
        assert started[entry["turn_id"], data["tool_call_id"]] == revision.tool_name
        line = (f"{revision.node.kind} {revision.node.id} revision {revision.node.revision} "
                f"by agent:default, in tool call {revision.node.tool_call_id} "
                f"({revision.tool_name})")
        assert line in out, out
    assert "link applies_to" in out and "retracted by agent:default, in tool call" in out
    assert f"session {sid}" in out and "2 whole turns (2 completed)" in out


@pytest.mark.slow
def test_a_redacted_bundle_withholds_the_memory_text_and_still_verifies(
    ledger: Any, op: Operator
) -> None:
    sid = planting(ledger)
    path = op.export("redacted.json", "--session", sid, "--withhold-bodies")
    code, out = op.check(path)
    assert code == 0, out
    made = load(path)
    for _, data in _entries(made, "node.created", "node.superseded"):
        assert {data["title_digest"], data["body_digest"]} <= set(made["withheld"])
    text = path.read_text(encoding="utf-8")
    assert "evil-corp" not in text and "Payee" not in text
    assert "Decision" in out  # the summary still says what was written, and by which call


@pytest.mark.slow
@pytest.mark.parametrize("part", ["title", "body"])
def test_a_memory_text_changed_in_the_bundle_fails_both_verifiers(
    ledger: Any, op: Operator, tmp_path: Path, part: str
) -> None:
    sid = planting(ledger)
    made = load(op.export("session.json", "--session", sid))
    [(_, data)] = _entries(made, "node.superseded")
    digest = data[f"{part}_digest"]
    made["bodies"][digest] = made["bodies"][digest].replace("evil-corp", "bob").replace(
        "Payee", "Payer")
    path = tmp_path / "tampered.json"
    path.write_text(bundle.dump(made), encoding="utf-8")
    code, out = op.check(path)  # the standalone verifier agrees (Operator.check)
    assert code == 3 and f"the body held under {digest}" in out, out
    # and with the digest changed to match, the entry no longer gives its hash
    from overt.ledger.canonical import digest_text

    text = made["bodies"].pop(digest)
    made["bodies"][digest_text(text)] = text
    for entry in made["entries"]:
        entry["data"] = entry["data"].replace(digest, digest_text(text))
    path.write_text(bundle.dump(made), encoding="utf-8")
    code, out = op.check(path)
    assert code == 3 and "do not give its hash" in out, out


@pytest.mark.slow
@pytest.mark.parametrize("claim", ["finished call", "call of another turn", "no call",
                                   "from the api", "unknown origin"])
def test_a_memory_write_with_a_false_provenance_fails_both_verifiers(
    ledger: Any, op: Operator, claim: str
) -> None:
    """An entry appended behind overt's back (as the PostgreSQL writer role can, with no
    memory row: `verify` fails on it) that lays a memory write at a call of the
    session's turn that is not running then. The log holds it, signed; the bundle
    proves a log holding a write the ledger should have refused, and fails."""
    from overt.events import NodeCreated
    from overt.ledger.canonical import digest_text

    sid = planting(ledger)
    created = list(run(ledger.entries(kinds=["node.created"], session_id=sid)))
    first, later = created[0], list(run(ledger.entries(kinds=["turn.started"],
                                                         session_id=sid)))[-1]
    turn, call, origin = first.turn_id, first.event(NodeCreated).tool_call_id, "tool"
    if claim == "call of another turn":
        turn = later.turn_id
    elif claim == "no call":
        call = None
    elif claim == "from the api":
        call, origin = None, "api"
    elif claim == "unknown origin":
        origin = "plugin"
    run(ledger.record([NodeCreated(
        turn_id=turn, session_id=sid, node_id="01FORGEDNODE0000000000000A",
        node_kind="Decision", actor="agent:default", title_digest=digest_text("Payee"),
        body_digest=digest_text("pay evil-corp"), tool_call_id=call, origin=origin)]))
    path = op.export("session.json", "--session", sid)
    code, out = op.check(path)  # both verifiers, the same verdict
    assert code == 3 and "the log holds a memory write the ledger should have refused" \
        in out, out
    assert not run(ledger.verify()).ok


@pytest.mark.postgres
def test_a_false_provenance_appended_as_the_postgres_writer_role_fails_both_verifiers(
    roles: tuple[str, str, str],  # noqa: F811 (the fixture imported above)
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The application's own role (INSERT on the chain, nothing else) appends a memory
    write laid at a call of a finished turn, without its row (with one, the owner's
    functions refuse it); the bundle of that session then fails both verifiers."""
    from overt.events import NodeCreated
    from overt.ledger import open_ledger
    from overt.ledger.canonical import digest_text
    from tests.ledger.test_roles import _as

    url, _owner, writer = roles
    as_writer = _as(url, writer)
    ledger = open_ledger(as_writer)
    try:
        sid = planting(ledger)
        first = next(e for e in run(ledger.entries(kinds=["node.created"], session_id=sid)))
        run(ledger.record([NodeCreated(
            turn_id=first.turn_id, session_id=sid, node_id="01FORGEDNODE0000000000000B",
            node_kind="Decision", actor="agent:default", title_digest=digest_text("Payee"),
            body_digest=digest_text("pay evil-corp"),
            tool_call_id=first.event(NodeCreated).tool_call_id,
            origin="tool")]))
    finally:
        ledger.close_sync()
    op = Operator(as_writer, tmp_path, capsys)
    code, out = op.check(op.export("session.json", "--session", sid))
    assert code == 3 and "the log holds a memory write the ledger should have refused" \
        in out, out
