"""The agent's tools answer the actor who asked with only what that actor may read
through the API: its own sessions, or every session with ``sessions.read_any``.

Every tool the runtime registers by default is run (the registry is enumerated, so a
tool added later is covered), with every value of each of its enumerated arguments,
as an actor who asked in its own session while another owner's sessions, turns,
errors and approval requests are on the ledger."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from overt.engine.record import resumption
from overt.models.fake import ScriptedModel
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.tools.base import Tool, ToolContext
from overt.types import ModelResponse, Usage
from tests.conftest import RuntimeFactory, cli_message, run

ALICE = Actor("mcp_client", "alice")
BOB = Actor("mcp_client", "bob")
MCP_GRANT = ["agent.ask", "trail.read", "approvals.read", "memory.read"]

GATE = Gate(Policy([
    Rule("tests.ask_links", "ask", "tests_ask_links", tools=("link_create",), priority=10),
    Rule("tests.allow", "allow", "tests_allow", "the rest runs"),
]))
"""Links are held for approval (so the other owner's turns leave requests); the rest runs."""


def _priced(text: str) -> ModelResponse:
    return ModelResponse(text, usage=Usage(120, 12, 0.002), model="m-test")


@dataclass(frozen=True, slots=True)
class World:
    """Alice's own turn; what Bob's sessions left on the record."""

    runtime: Runtime
    alice_session: str
    alice_turn: str
    bob_ids: frozenset[str]
    """Bob's session ids, turn ids and approval request ids."""
    bob_node: str
    alice_node: str


def _world(make_runtime: RuntimeFactory) -> World:
    replies: list[Any] = [
        # Alice: one answered turn that writes a memory node
        {"tool_calls": [{"name": "node_create", "arguments": {
            "kind": "Note", "title": "alice's fact", "body": "alice wrote this"}}]},
        _priced("noted"),
        # Bob: a memory node, then a link held for approval (approved, taken up, never run)
        {"tool_calls": [{"name": "node_create", "arguments": {
            "kind": "Note", "title": "bob's fact", "body": "bob wrote this"}}]},
        {"tool_calls": [{"name": "link_create", "arguments": {
            "kind": "relates_to", "from_id": "x", "to_id": "y"}}]},
        # Bob: a link held and left pending
        {"tool_calls": [{"name": "link_create", "arguments": {
            "kind": "relates_to", "from_id": "y", "to_id": "x"}}]},
        # Bob: the newest error on the ledger
        {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
        _priced("that failed"),
        # Alice again (when a test asks): her usage per session
        {"tool_calls": [{"name": "get_usage", "arguments": {"by": "session"}}]}, "done",
    ]
    runtime = make_runtime(ScriptedModel(replies), None, gate=GATE)
    alice = run(runtime.respond(cli_message("remember this", "alice"), session_id="cli:alice",
                                actor=ALICE))
    bob_turns = [run(runtime.respond(cli_message(text, "bob"), session_id="cli:bob",
                                     actor=BOB))
                 for text in ("remember and link", "link again")]
    held = [r.awaiting_approval for r in bob_turns]
    assert all(held), bob_turns
    approved = run(runtime.approvals.decide(held[0], "approved", by=Actor.operator()))
    # a process took the approval up and stopped before the call ran: "unstarted"
    run(runtime.ledger.record([resumption(approved.turn_id, approved.session_id,
                                          approved.request_id, "approved", "operator:default")]))
    failed = run(runtime.respond(cli_message("use a tool that is not there", "bob"),
                                 session_id="cli:bob2", actor=BOB))
    nodes = {e.session_id: e.data["node_id"]
             for e in run(runtime.ledger.entries(kinds=["node.created"]))}
    bob_ids = {"cli:bob", "cli:bob2", *held, failed.turn_id,
               *(r.turn_id for r in bob_turns)}
    return World(runtime, "cli:alice", alice.turn_id, frozenset(bob_ids),
                 nodes["cli:bob"], nodes["cli:alice"])


def _arguments(tool: Tool, world: World) -> list[dict[str, Any]]:
    """A valid call of ``tool``, then one per value of each enumerated argument (ids
    name memory nodes, Bob's and Alice's)."""
    properties: dict[str, Any] = tool.input_schema.get("properties", {})
    ids = {"id": world.bob_node, "from_id": world.bob_node, "to_id": world.alice_node}
    base: dict[str, Any] = {}
    for name in tool.input_schema.get("required", []):
        prop = properties[name]
        base[name] = prop["enum"][0] if "enum" in prop else ids.get(name, "x")
    calls = [base, {**base, **{k: v for k, v in ids.items() if k in properties}}]
    for name, prop in properties.items():
        values = prop.get("enum") or [v.get("const") for v in prop.get("anyOf", [])
                                      if "const" in v] or []
        calls.extend({**base, name: value} for value in values)
    return calls


def _answers(world: World, capabilities: Capabilities) -> dict[str, str]:
    """Each tool's answers as Alice's turn would get them, as text. A tool that writes
    runs in a call of a later turn of hers, still in progress, its start on the record
    first as the engine does (a memory write names a call the chain shows running)."""
    from overt.events import ToolCallStarted
    from overt.ids import new_ulid
    from overt.ledger.canonical import digest_text

    runtime = world.runtime
    out: dict[str, str] = {}
    running = new_ulid()
    for tool in runtime.tools:
        turn = world.alice_turn
        if not tool.read_only:
            turn = running
            run(runtime.ledger.record([ToolCallStarted(
                turn_id=turn, session_id=world.alice_session, tool_call_id=f"call_{tool.name}",
                tool_name=tool.name, triggered_by="cli", caller_session_id="cli:alice",
                args_sha256=digest_text("{}"))], {digest_text("{}"): "{}"}))
        context = ToolContext(runtime.ledger, turn, world.alice_session, "cli",
                              "cli:alice", f"call_{tool.name}", runtime.started_at,
                              Actor.agent(), capabilities)
        answers = [run(tool.run(arguments, context)) for arguments in _arguments(tool, world)]
        out[tool.name] = json.dumps(answers, default=str)
    return out


def _leaks(answers: dict[str, str], ids: frozenset[str]) -> dict[str, list[str]]:
    return {name: sorted(i for i in ids if i in text) for name, text in answers.items()
            if any(i in text for i in ids)}


def test_no_tool_names_another_owners_session_turn_or_approval_to_an_actor_without_read_any(
        make_runtime: RuntimeFactory) -> None:
    world = _world(make_runtime)
    assert len(world.runtime.tools) >= 10  # every tool overt registers by default
    answers = _answers(world, Capabilities())  # mcp_client: no sessions.read_any
    assert _leaks(answers, world.bob_ids) == {}
    # what is Alice's own is still answered
    assert world.alice_session in answers["get_usage"]


def test_an_actor_holding_sessions_read_any_is_answered_about_every_session(
        make_runtime: RuntimeFactory) -> None:
    world = _world(make_runtime)
    answers = _answers(world, Capabilities({"mcp_client": [*MCP_GRANT, "sessions.read_any"]}))
    assert {"cli:bob", "cli:bob2"} <= set(_leaks(answers, world.bob_ids)["get_usage"])
    state = json.loads(answers["get_operational_state"])[0]
    assert state["last_error"]["turn_id"] in world.bob_ids
    unstarted = [c["request_id"] for c in state["unstarted_approved_calls"]]
    assert len(unstarted) == 1 and unstarted[0] in world.bob_ids
    assert state["pending_approvals"] == 1


def test_the_operational_state_an_actor_without_read_any_gets_is_of_its_own_sessions(
        make_runtime: RuntimeFactory) -> None:
    world = _world(make_runtime)
    answers = _answers(world, Capabilities())
    state = json.loads(answers["get_operational_state"])[0]
    assert state["last_error"] is None
    assert state["pending_approvals"] == 0
    assert state["unstarted_approved_calls"] == [] == state["interrupted_approved_calls"]
    assert state["turns_today"] == 1  # Alice's one turn, not Bob's three
    usage = json.loads(answers["get_usage"])
    assert usage[0]["inferences"] == 2  # Alice's two model calls, not Bob's


def test_a_turn_asking_for_usage_by_session_is_answered_with_the_askers_sessions_only(
        make_runtime: RuntimeFactory) -> None:
    world = _world(make_runtime)
    runtime = world.runtime
    model = runtime.model
    assert isinstance(model, ScriptedModel)
    run(runtime.respond(cli_message("what did I spend?", "alice"), session_id="cli:alice",
                        actor=ALICE))
    result = model.requests[-1].messages[-1].content
    assert "cli:alice" in result
    assert not [i for i in world.bob_ids if i in result]
