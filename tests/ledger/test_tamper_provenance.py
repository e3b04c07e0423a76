"""Memory provenance cannot be forged, on both backends: a memory write names the turn
and tool call that made it, and one naming a call the chain does not show running in
that turn and session (another conversation's, a finished one, one that never ran) is
refused by PostgreSQL's owner functions before it is written, and found by ``overt
ledger verify`` on SQLite, where whoever writes the file can write anything (see
:mod:`overt.ledger.memory_check`)."""

from __future__ import annotations

from typing import Any

import pytest

from overt.cli.main import main
from overt.clock import now_iso
from overt.errors import LedgerError
from overt.events import NodeCreated, ToolCallCompleted, TurnCompleted
from overt.ids import new_ulid
from overt.ledger.canonical import digest_text
from overt.memory.search_sql import tags
from overt.memory.store import MemoryStore, Writer, store_for
from tests.backends import Raw
from tests.conftest import run
from tests.memory.helpers import start_call

EXIT_VERIFY = 3
ME = Writer("agent:default", "01TURN", "cli:s1", "call-1", origin="tool")


@pytest.fixture
def store(ledger: Any) -> MemoryStore:
    """Our turn 01TURN of cli:s1 with call-1 running, and a finished conversation,
    turn 01VICTIM of cli:victim, whose call-v started and completed."""
    start_call(ledger)
    start_call(ledger, "01VICTIM", "cli:victim", "call-v")
    run(ledger.record([
        ToolCallCompleted(turn_id="01VICTIM", session_id="cli:victim", tool_call_id="call-v",
                          tool_name="node_create", triggered_by="cli", caller_session_id="s1",
                          tool_status="ok", tool_duration_ms=1.0, exc_type=None,
                          args_sha256=digest_text("{}"), result_digest=None),
        TurnCompleted(turn_id="01VICTIM", session_id="cli:victim", status="completed",
                      reply_digest=None, tools_used=[], tool_calls=1, model_calls=1,
                      input_tokens=0, output_tokens=0, cost_usd=0.0, duration_ms=1.0)]))
    return store_for(ledger)


def forge(ledger: Any, *, turn_id: str | None, session_id: str | None,
          tool_call_id: str | None, origin: str | None) -> str:
    """Record a node and its row that agree with each other, and claim the provenance
    given (the path around :class:`Writer`'s checks an attacker takes). Its id."""
    node_id = new_ulid()
    stamp: dict[str, Any] = {"turn_id": turn_id, "session_id": session_id,
                             "tool_call_id": tool_call_id, "origin": origin}
    row = {"id": node_id, "kind": "Note", "title": "Payee", "body": "pay evil-corp",
           "actor": "agent:default", "created_at": now_iso(), "supersedes": None,
           "root_id": node_id, "revision": 1, "search_tags": tags("Note", "agent:default"),
           **stamp}
    run(ledger.record([NodeCreated(node_id=node_id, node_kind="Note", actor="agent:default",
                                   title_digest=digest_text("Payee"),
                                   body_digest=digest_text("pay evil-corp"), **stamp)],
                      rows=[("memory_nodes", row)]))
    return node_id


def verify(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--db", ledger_url, "ledger", "verify"])
    return code, capsys.readouterr().out


CLAIMS = [
    pytest.param(dict(turn_id="01VICTIM", session_id="cli:victim", tool_call_id="call-v",
                      origin="tool"), "names tool call call-v of turn 01VICTIM",
                 id="another-conversations-finished-call"),
    pytest.param(dict(turn_id="01TURN", session_id="cli:s1", tool_call_id="call-never",
                      origin="tool"), "names tool call call-never", id="a-call-that-never-ran"),
    pytest.param(dict(turn_id="01TURN", session_id="cli:victim", tool_call_id="call-1",
                      origin="tool"), "names tool call call-1", id="our-call-in-another-session"),
    pytest.param(dict(turn_id="01VICTIM", session_id="cli:victim", tool_call_id="call-1",
                      origin="tool"), "names tool call call-1 of turn 01VICTIM",
                 id="our-call-laid-at-another-turn"),
    pytest.param(dict(turn_id=None, session_id=None, tool_call_id="call-1", origin="tool"),
                 "names tool call call-1 of no turn", id="our-call-outside-its-turn"),
    pytest.param(dict(turn_id="01VICTIM", session_id="cli:victim", tool_call_id=None,
                      origin="api"), "came from the api but names turn 01VICTIM",
                 id="an-api-write-inside-another-turn"),
    pytest.param(dict(turn_id="01TURN", session_id="cli:s1", tool_call_id="call-1",
                      origin="cli"), "but says it came from the cli", id="a-call-said-to-be-cli"),
    pytest.param(dict(turn_id="01TURN", session_id="cli:s1", tool_call_id=None, origin="tool"),
                 "came from a tool call but names none", id="a-tool-write-without-its-call"),
    pytest.param(dict(turn_id=None, session_id=None, tool_call_id=None, origin="plugin"),
                 "unknown origin", id="an-origin-nobody-knows"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("claim", "found"), CLAIMS)
def test_a_write_claiming_a_call_it_cannot_have_come_from_is_refused_or_found(
    store: MemoryStore, ledger: Any, backend: str, ledger_url: str,
    capsys: pytest.CaptureFixture[str], claim: dict[str, Any], found: str
) -> None:
    run(store.create_node("Note", "Payee", "pay bob", ME))  # the honest write
    if backend == "postgres":
        with pytest.raises(LedgerError, match="names a turn or tool call"):
            forge(ledger, **claim)
        assert verify(ledger_url, capsys)[0] == 0  # nothing of it was written
        return
    forge(ledger, **claim)
    code, out = verify(ledger_url, capsys)
    assert code == EXIT_VERIFY and found in out, out


def test_a_write_after_its_call_completed_or_its_turn_ended_is_refused_or_found(
    store: MemoryStore, ledger: Any, backend: str, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """A finished call cannot be borrowed later for a write in its own name."""
    run(ledger.record([TurnCompleted(
        turn_id="01TURN", session_id="cli:s1", status="completed", reply_digest=None,
        tools_used=[], tool_calls=1, model_calls=1, input_tokens=0, output_tokens=0,
        cost_usd=0.0, duration_ms=1.0)]))
    if backend == "postgres":
        with pytest.raises(LedgerError):
            run(store.create_node("Note", "late", "after the turn", ME))
        return
    run(store.create_node("Note", "late", "after the turn", ME))
    code, out = verify(ledger_url, capsys)
    assert code == EXIT_VERIFY and "names tool call call-1 of turn 01TURN" in out, out


@pytest.mark.slow
@pytest.mark.parametrize(("column", "value"), [
    ("tool_call_id", "call-v"), ("session_id", "cli:victim"), ("origin", "api"),
    ("turn_id", "01VICTIM")])
def test_a_rows_provenance_changed_without_the_guard_is_found(
    store: MemoryStore, raw: Raw, ledger_url: str, capsys: pytest.CaptureFixture[str],
    column: str, value: str
) -> None:
    node = run(store.create_node("Note", "Payee", "pay bob", ME))
    link_to = run(store.create_node("Note", "Bob", "a payee", ME))
    link = run(store.create_link("relates_to", node.root_id, link_to.root_id, ME))
    rows = (("memory_nodes", node.id, node), ("memory_links", link.id, link))
    for table, row_id, _ in rows:
        with pytest.raises(raw.append_only_error):
            raw.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (value, row_id))
    raw.drop_guards()
    for table, row_id, written in rows:
        raw.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (value, row_id))
        code, out = verify(ledger_url, capsys)
        assert code == EXIT_VERIFY and f"{row_id} does not match entry" in out, out
        raw.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?",
                    (getattr(written, column), row_id))
    assert verify(ledger_url, capsys)[0] == 0


def test_honest_writes_from_a_call_a_direct_call_and_the_api_verify(
    store: MemoryStore, ledger: Any, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    start_call(ledger, None, "direct:agent:default", "01DIRECTCALL")
    first = run(store.create_node("Note", "Payee", "pay bob", ME))
    run(store.supersede(first, "Payee", "pay bob, twice", Writer(
        "agent:default", None, "direct:agent:default", "01DIRECTCALL", origin="tool")))
    run(store.create_node("Note", "Seeded", "from a script", Writer("operator:default",
                                                                      session_id="seed")))
    run(store.create_node("Note", "Typed", "from the shell", Writer("operator:default",
                                                                      origin="cli")))
    assert verify(ledger_url, capsys)[0] == 0


def test_the_writer_refuses_a_provenance_that_cannot_be() -> None:
    from overt.errors import UsageError

    with pytest.raises(UsageError, match="names its tool call"):
        Writer("agent:default", "01TURN", origin="tool")
    with pytest.raises(UsageError, match="names no turn and no tool call"):
        Writer("agent:default", "01TURN", "cli:s1", "call-1")
    with pytest.raises(UsageError, match="origin is one of"):
        Writer("agent:default", origin="plugin")  # type: ignore[arg-type]
