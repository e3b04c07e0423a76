"""A bundle whose memory write names a tool call that did not make it fails both
verifiers, on both backends.

The forger is the log's operator: they append a memory entry to their own log (as
PostgreSQL's writer role can, with no memory row; on SQLite anyone who writes the
file can), claiming a call the turn does not show running then, and sign the
checkpoint the bundle is proved under with their own key. Every hash, path and
signature of such a bundle holds; only the claim does not, and the turn is whole in
the bundle, so both verifiers read it there as ``verify`` reads it from the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overt.events import (
    LinkCreated,
    NodeCreated,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnStarted,
)
from overt.ledger.canonical import digest_text
from tests.conftest import run
from tests.ledger.bundle_helpers import Operator

TURN, OTHER, SESSION = "01TURN", "01OTHER", "cli:s1"


@pytest.fixture
def op(ledger: Any, ledger_url: str, tmp_path: Path,
       capsys: pytest.CaptureFixture[str]) -> Operator:
    return Operator(ledger_url, tmp_path, capsys)


def _turn(ledger: Any, turn_id: str, *calls: str) -> None:
    """``turn_id`` of the session begins and starts ``calls`` (left running)."""
    run(ledger.record([TurnStarted(
        turn_id=turn_id, session_id=SESSION, source="cli", caller_session_id="cli:s1",
        message_digest=digest_text("hi"), model="m", route="r", max_tool_calls=8,
        actor="operator:default")],
        {digest_text("hi"): "hi"}))
    for call in calls:
        run(ledger.record([ToolCallStarted(
            turn_id=turn_id, session_id=SESSION, tool_call_id=call, tool_name="node_create",
            triggered_by="cli", caller_session_id="s1", args_sha256=digest_text("{}"))],
            {digest_text("{}"): "{}"}))


def _finish(ledger: Any, turn_id: str, call: str) -> None:
    run(ledger.record([ToolCallCompleted(
        turn_id=turn_id, session_id=SESSION, tool_call_id=call, tool_name="node_create",
        triggered_by="cli", caller_session_id="s1", tool_status="ok", tool_duration_ms=1.0,
        exc_type=None, args_sha256=digest_text("{}"), result_digest=None)]))


def _node(ledger: Any, turn_id: str, call: str | None, origin: str | None,
          node_id: str = "01NODE00000000000000000000") -> None:
    """A memory write of ``turn_id`` naming ``call`` and ``origin``, its title and body
    in the content tier (the bundle carries them)."""
    run(ledger.record([NodeCreated(
        turn_id=turn_id, session_id=SESSION, node_id=node_id, node_kind="Decision",
        actor="agent:default", title_digest=digest_text("Payee"),
        body_digest=digest_text("pay evil-corp"), tool_call_id=call, origin=origin)],
        {digest_text("Payee"): "Payee", digest_text("pay evil-corp"): "pay evil-corp"}))


def _honest(ledger: Any) -> None:
    _turn(ledger, TURN, "call-1")
    _node(ledger, TURN, "call-1", "tool")


def _never_ran(ledger: Any) -> None:
    _turn(ledger, TURN, "call-1")
    _node(ledger, TURN, "call-never", "tool")


def _finished(ledger: Any) -> None:
    _turn(ledger, TURN, "call-1")
    _finish(ledger, TURN, "call-1")
    _node(ledger, TURN, "call-1", "tool")


def _not_yet_started(ledger: Any) -> None:
    _turn(ledger, TURN)
    _node(ledger, TURN, "call-1", "tool")
    _turn(ledger, OTHER)  # nothing more of TURN: its call starts only in the claim
    run(ledger.record([ToolCallStarted(
        turn_id=TURN, session_id=SESSION, tool_call_id="call-1", tool_name="node_create",
        triggered_by="cli", caller_session_id="s1", args_sha256=digest_text("{}"))],
        {digest_text("{}"): "{}"}))


def _another_turns_call(ledger: Any) -> None:
    _turn(ledger, OTHER, "call-o")  # running, but in the other turn of the session
    _turn(ledger, TURN, "call-1")
    _node(ledger, TURN, "call-o", "tool")


def _after_the_turn(ledger: Any) -> None:
    _turn(ledger, TURN, "call-1")
    run(ledger.record([TurnCompleted(
        turn_id=TURN, session_id=SESSION, status="completed", reply_digest=None,
        tools_used=[], tool_calls=0, model_calls=0, input_tokens=0, output_tokens=0,
        cost_usd=0.0, duration_ms=1.0)]))
    _node(ledger, TURN, "call-1", "tool")


def _said_to_be_cli(ledger: Any) -> None:
    _turn(ledger, TURN, "call-1")
    _node(ledger, TURN, "call-1", "cli")


def _tool_without_its_call(ledger: Any) -> None:
    _turn(ledger, TURN, "call-1")
    _node(ledger, TURN, None, "tool")


def _api_inside_a_turn(ledger: Any) -> None:
    _turn(ledger, TURN, "call-1")
    _node(ledger, TURN, None, "api")


def _a_link_by_a_call_that_never_ran(ledger: Any) -> None:
    _honest(ledger)
    _node(ledger, TURN, "call-1", "tool", node_id="01NODE00000000000000000001")
    run(ledger.record([LinkCreated(
        turn_id=TURN, session_id=SESSION, link_id="01LINK00000000000000000000",
        link_kind="applies_to", from_id="01NODE00000000000000000000",
        to_id="01NODE00000000000000000001", actor="agent:default",
        tool_call_id="call-never", origin="tool")]))


FORGERIES = [_never_ran, _finished, _not_yet_started, _another_turns_call, _after_the_turn,
             _said_to_be_cli, _tool_without_its_call, _api_inside_a_turn,
             _a_link_by_a_call_that_never_ran]


@pytest.mark.slow
def test_an_honest_memory_write_in_a_turn_in_progress_verifies(ledger: Any, op: Operator):
    _honest(ledger)
    code, out = op.check(op.export("honest.json", "--turn", TURN))
    assert code == 0, out
    assert "Decision 01NODE00000000000000000000 revision 1 by agent:default, in tool call " \
           "call-1 (node_create)" in out


@pytest.mark.slow
@pytest.mark.parametrize("forge", FORGERIES, ids=[f.__name__[1:] for f in FORGERIES])
def test_a_memory_write_naming_a_false_tool_call_fails_both_verifiers(
        ledger: Any, op: Operator, forge: Any):
    forge(ledger)
    for flags in (("--turn", TURN), ("--session", SESSION)):
        path = op.export("forged.json", *flags)  # signed by the forger's own key
        code, out = op.check(path)  # and the standalone verifier agrees
        assert code == 3, out
        assert "memory write" in out, out
