"""Replay: recorded turns run again through today's engine, gate, hooks and history
window, answered from the record (no model asked, no tool run), on both backends.

A record of turns with plugins that provide and block, an approval and a quarantine
replays with no divergence; a rule, a tool's schema or the history window changed
is each found, and nothing else; a record that does not verify is refused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from overt.channels.transcript import Transcript
from overt.engine import loop
from overt.engine.values import EngineSettings
from overt.hooks import Block, PluginHost, hookimpl
from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Condition, Rule
from overt.replay import ReplayRefused, TurnReplay
from overt.runtime import Runtime
from overt.tools.base import Tool, tool
from tests.backends import Raw
from tests.conftest import cli_message, run

RAN: list[str] = []


@tool(read_only=True)
async def echo(text: str) -> str:
    """Echo the text back."""
    RAN.append("echo")
    return f"echo:{text}"


@tool(read_only=True)
async def cached(query: str) -> str:
    """Look something up (a plugin answers it from its cache)."""
    RAN.append("cached")
    return "fresh"


@tool(read_only=True)
async def danger() -> str:
    """Do something a plugin blocks."""
    RAN.append("danger")
    return "done"


@tool
async def note(text: str) -> str:
    """Write a note (waits for an operator's approval)."""
    RAN.append("note")
    return f"noted:{text}"


@tool
async def wire_money(amount: int) -> str:
    """Send money (held in quarantine)."""
    RAN.append("wire_money")
    return "sent"


class Cache:
    @hookimpl
    def pre_tool_call_can_provide_result(self, tool_name: str) -> dict[str, str] | None:
        return {"result": "from the cache"} if tool_name == "cached" else None


class Guard:
    @hookimpl
    def pre_tool_call(self, tool_name: str) -> Block | None:
        return Block("too_risky", "not this one") if tool_name == "danger" else None


TOOLS = [echo, cached, danger, note, wire_money]
RULES = [Rule("notes-ask", "ask", "note_needs_approval", priority=5, tools=("note",)),
         Rule("money-held", "quarantine", "money_review", priority=5, tools=("wire_money",))]


def build(ledger: Ledger, tmp_path: Path, replies: Sequence[Any] = (), *,
          rules: Sequence[Rule] = RULES, tools: Sequence[Tool] = TOOLS,
          plugins: bool = True, context_window: int | None = None) -> Runtime:
    host = PluginHost()
    if plugins:
        host.register(Cache(), "cache")
        host.register(Guard(), "guard")
    return Runtime(model=ScriptedModel(list(replies), context_window=context_window),
                   ledger=ledger, tools=list(tools), plugins=host, settings=EngineSettings(),
                   transcript=Transcript(tmp_path / "transcript.jsonl"),
                   gate=Gate(Policy(rules)))


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def record_turns(ledger: Ledger, tmp_path: Path, rounds: int = 1) -> list[str]:
    """Five turns in two sessions: read-only calls run together, a plugin's result, a
    plugin's block, an approval approved, a quarantine; ``rounds`` times, each round
    in two sessions of its own (the first's ``s`` and ``t``). Returns the turn ids."""
    rt = build(ledger, tmp_path, [
        calls(("echo", {"text": "a"}), ("cached", {"query": "q"})), "one",
        calls(("danger", {})), "blocked",
        calls(("note", {"text": "n"})), "noted",
        calls(("wire_money", {"amount": 5})), "held",
        calls(("echo", {"text": "b"}), ("echo", {"text": "c"})), "five"] * rounds)
    ids: list[str] = []
    for n in range(rounds):
        s, t = ("s", "t") if n == 0 else (f"s{n}", f"t{n}")
        ids += [run(rt.respond(cli_message("first", session=s))).turn_id,
                run(rt.respond(cli_message("second", session=s))).turn_id]
        paused = run(rt.respond(cli_message("third", session=s)))
        assert paused.awaiting_approval is not None
        resumed = run(rt.approve(paused.awaiting_approval))
        assert resumed.result is not None and resumed.result.text == "noted"
        ids.append(paused.turn_id)
        ids += [run(rt.respond(cli_message("fourth", session=t))).turn_id,
                run(rt.respond(cli_message("fifth", session=t))).turn_id]
    return ids


def replay(rt: Runtime, **scope: Any) -> list[TurnReplay]:
    async def collect() -> list[TurnReplay]:
        return [r async for r in rt.replay(**scope)]
    return run(collect())


def lines(results: Sequence[TurnReplay]) -> list[str]:
    return [d.line() for r in results for d in r.divergences]


def test_recorded_turns_with_plugins_an_approval_and_a_quarantine_replay_with_no_divergence(
    ledger: Ledger, tmp_path: Path
) -> None:
    ids = record_turns(ledger, tmp_path)
    before = len(run(ledger.entries()))
    RAN.clear()
    results = replay(build(ledger, tmp_path))
    assert [r.turn_id for r in results] == ids
    assert lines(results) == [] and all(r.notes == () for r in results)
    assert RAN == []  # no tool ran
    assert len(run(ledger.entries())) == before  # nothing written to the ledger read


@pytest.mark.slow
def test_a_thousand_recorded_turns_replay_with_no_divergence(
    ledger: Ledger, tmp_path: Path
) -> None:
    """Issue 37's measure: 1,000 turns with plugins that provide and block, 200
    approvals and 200 quarantined calls, replayed with no divergence and no note."""
    ids = record_turns(ledger, tmp_path, rounds=200)
    RAN.clear()
    results = replay(build(ledger, tmp_path))
    assert len(results) == len(ids) == 1000 and [r.turn_id for r in results] == ids
    assert lines(results) == [] and all(r.notes == () for r in results)
    assert RAN == []


def test_one_session_or_one_turn_can_be_replayed_alone(ledger: Ledger, tmp_path: Path) -> None:
    ids = record_turns(ledger, tmp_path)
    rt = build(ledger, tmp_path)
    assert [r.turn_id for r in replay(rt, session_id="cli:t")] == ids[3:]
    assert [r.turn_id for r in replay(rt, turn_id=ids[1])] == [ids[1]]


def test_a_changed_rule_is_found_with_the_decision_it_changes_and_nothing_else(
    ledger: Ledger, tmp_path: Path
) -> None:
    ids = record_turns(ledger, tmp_path)
    no_c = Rule("no-c", "deny", "no_c", priority=9, tools=("echo",),
                when=(Condition("text", "eq", "c"),))
    results = replay(build(ledger, tmp_path, rules=[*RULES, no_c]))
    found = [d for r in results for d in r.divergences]
    assert {d.turn_id for d in found} == {ids[4]}, lines(results)
    decision = [d for d in found if d.kind == "decision"]
    assert len(decision) == 1 and decision[0].rule == "no-c"
    assert decision[0].recorded == "allow by default.read_only"
    assert decision[0].replayed == "deny by no-c"
    assert [d.kind for d in found if d.kind != "decision"] == ["request", "refused"]
    # the model would now read the refusal: its next request differs in what follows
    assert [d.part for d in found if d.kind == "request"] == ["messages"]


def test_a_changed_tool_schema_is_found_on_each_request_that_offers_it(
    ledger: Ledger, tmp_path: Path
) -> None:
    record_turns(ledger, tmp_path)

    @tool(read_only=True, name="echo")
    async def echo_louder(text: str, loud: bool = False) -> str:
        """Echo the text back."""
        return f"echo:{text}"

    tools = [echo_louder, cached, danger, note, wire_money]
    found = [d for r in replay(build(ledger, tmp_path, tools=tools)) for d in r.divergences]
    assert found and {(d.kind, d.part) for d in found} == {("request", "tool_schema")}
    assert {d.detail for d in found} == {"tool echo: its schema differs"}
    assert len(found) == 10  # every inference of the five turns offered it


def test_a_narrower_history_window_is_found_on_the_turns_it_cuts(
    ledger: Ledger, tmp_path: Path
) -> None:
    ids = record_turns(ledger, tmp_path)
    found = [d for r in replay(build(ledger, tmp_path, context_window=1450))
             for d in r.divergences]
    assert found and {(d.kind, d.part) for d in found} == {("request", "window")}
    assert ids[0] not in {d.turn_id for d in found}  # a session's first turn has no history


def test_a_plugin_that_no_longer_provides_or_blocks_is_found(
    ledger: Ledger, tmp_path: Path
) -> None:
    ids = record_turns(ledger, tmp_path)
    found = [d for r in replay(build(ledger, tmp_path, plugins=False)) for d in r.divergences]
    hooks = [d for d in found if d.kind == "hook"]
    assert [(d.turn_id, d.recorded) for d in hooks] == [
        (ids[0], "hook.provided cache cached"), (ids[1], "hook.blocked guard danger")]
    assert all(d.replayed == "(none)" for d in hooks)


def test_turns_recorded_before_requests_were_replay_with_a_note_per_inference(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop.Turn, "_request_digest", lambda self, request, sent: None)
    record_turns(ledger, tmp_path)
    monkeypatch.undo()
    results = replay(build(ledger, tmp_path))
    assert lines(results) == []
    notes = [n for r in results for n in r.notes]
    assert len(notes) == 10 and all(n.endswith("request not recorded") for n in notes)


def test_a_tampered_body_makes_replay_refuse(ledger: Ledger, raw: Raw, tmp_path: Path) -> None:
    record_turns(ledger, tmp_path)
    [first, *_] = run(ledger.entries(kinds=["inference"]))
    digest = first.data["request_digest"]
    body = '{"v":1}'
    raw.drop_guards().execute("UPDATE content_blobs SET body = ? WHERE digest = ?",
                              (body.encode() if raw.pg else body, digest))
    with pytest.raises(ReplayRefused, match="does not verify"):
        replay(build(ledger, tmp_path))


def test_a_tampered_entry_makes_replay_refuse(ledger: Ledger, raw: Raw, tmp_path: Path) -> None:
    record_turns(ledger, tmp_path)
    raw.drop_guards().execute(
        "UPDATE audit_log SET data = replace(data, '\"effect\":\"quarantine\"', "
        "'\"effect\":\"allow\"') WHERE kind = 'policy.decision'" if not raw.pg else
        "UPDATE audit_log SET data = replace(data::text, '\"effect\":\"quarantine\"', "
        "'\"effect\":\"allow\"')::jsonb WHERE kind = 'policy.decision'")
    with pytest.raises(ReplayRefused):
        replay(build(ledger, tmp_path))


def test_a_changed_system_prompt_is_found_on_each_request_as_the_prompt(
    ledger: Ledger, tmp_path: Path
) -> None:
    record_turns(ledger, tmp_path)
    rt = build(ledger, tmp_path)
    rt.engine.system_prompt += "\nAlways answer in French."
    found = [d for r in replay(rt) for d in r.divergences]
    assert {(d.kind, d.part) for d in found} == {("request", "prompt")}
    assert len(found) == 10


REPLIES: list[Any] = [
    calls(("echo", {"text": "a"}), ("cached", {"query": "q"})), "one",
    calls(("danger", {})), "blocked",
    calls(("note", {"text": "n"})), "noted",
    calls(("wire_money", {"amount": 5})), "held",
    calls(("echo", {"text": "b"}), ("echo", {"text": "c"})), "five"]
"""What record_turns' model answers, in order."""


def test_a_model_re_asked_that_answers_as_recorded_reproduces_every_answer(
    ledger: Ledger, tmp_path: Path
) -> None:
    record_turns(ledger, tmp_path)
    asked = ScriptedModel(list(REPLIES))
    results = replay(build(ledger, tmp_path), ask=asked)
    assert lines(results) == [] and all(r.notes == () for r in results)
    assert asked.remaining == 0 and sum(r.asked for r in results) == 10  # each once


def test_a_model_re_asked_that_answers_otherwise_is_found_on_that_inference_only(
    ledger: Ledger, tmp_path: Path
) -> None:
    ids = record_turns(ledger, tmp_path)
    changed = list(REPLIES)
    changed[3] = "blocked!"  # the second turn's answer, one byte more
    changed[8] = calls(("echo", {"text": "b"}), ("echo", {"text": "d"}))
    results = replay(build(ledger, tmp_path), ask=ScriptedModel(changed))
    found = [(r.turn_id, d.step, d.kind, d.part) for r in results for d in r.divergences]
    assert found == [(ids[1], "inference 1", "answer", "text"),
                     (ids[4], "inference 0", "answer", "tool_calls")]
    detail = next(d for r in results for d in r.divergences if d.part == "text").detail
    assert "from character 8 of the text" in detail  # '"blocked' then '"' against '!'
