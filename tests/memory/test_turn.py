"""Memory through the engine: a scripted agent stores a Decision, links it to a
Component, and a later turn finds it by search."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overt.models.fake import FunctionModel, Reply
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.types import ModelRequest
from tests.conftest import RuntimeFactory, cli_message, run

Step = Callable[[list[dict[str, Any]]], Reply]


def agent(steps: list[Step]) -> FunctionModel:
    """A model that plays ``steps`` in order, each given the tool results so far (parsed)."""
    queue = list(steps)

    def reply(request: ModelRequest) -> Reply:
        results = [json.loads(m.content) for m in request.messages
                   if m.role == "tool" and m.content.startswith("{")]
        return queue.pop(0)(results)

    return FunctionModel(reply)


def remembering(model: FunctionModel, ledger: Any) -> Runtime:
    """A runtime whose policy lets the agent write its memory without an approval
    (the defaults hold every mutating tool for one)."""
    allow = Rule("memory.writes", "allow", "memory_writes", "the agent keeps its own memory",
                 tools=("node_*", "link_*"))
    return Runtime(model=model, ledger=ledger, gate=Gate(Policy([allow])))


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_the_agent_stores_a_decision_links_it_and_finds_it_in_a_later_turn(
    ledger: Any
) -> None:
    model = agent([
        lambda _: {"tool_calls": [
            tool("node_create", kind="Decision", title="Use WAL mode",
                 body="The SQLite ledger runs in WAL mode so readers never block."),
            tool("node_create", kind="Component", title="Ledger", body="The audit store.")]},
        lambda r: {"tool_calls": [tool("link_create", kind="applies_to",
                                       from_id=r[0]["node"]["id"], to_id=r[1]["node"]["id"])]},
        lambda r: "Noted: WAL mode, linked to the ledger." if r[2]["ok"] else "link failed",
        lambda _: {"tool_calls": [tool("node_search", query="why WAL readers",
                                       kind="Decision")]},
        lambda r: {"tool_calls": [tool("node_neighbors", id=r[0]["results"][0]["id"])]},
        lambda r: f"Found: {r[0]['results'][0]['title']} -> {r[1]['nodes'][0]['title']}",
    ])
    runtime = remembering(model, ledger)
    first = run(runtime.respond(cli_message("remember we use WAL", session="s1")))
    assert first.error is None and first.text == "Noted: WAL mode, linked to the ledger."
    assert first.tools_used == ["node_create", "node_create", "link_create"]
    later = run(runtime.respond(cli_message("what did we decide about WAL?", session="s2")))
    assert later.error is None and later.text == "Found: Use WAL mode -> Ledger"
    kinds = [e.kind for e in run(ledger.entries(kinds=["node.created", "link.created",
                                                       "tool_call.completed"]))]
    assert kinds.count("node.created") == 2 and kinds.count("link.created") == 1
    statuses = [e.data["tool_status"] for e in run(ledger.entries(
        kinds=["tool_call.completed"]))]
    assert statuses == ["ok"] * 5
    decisions = [e.data for e in run(ledger.entries(kinds=["policy.decision"]))]
    assert [(d["tool_name"], d["effect"]) for d in decisions][:3] == [
        ("node_create", "allow"), ("node_create", "allow"), ("link_create", "allow")]
    assert run(ledger.verify()).ok


def test_the_memory_tools_are_offered_to_the_model_with_their_kinds(
    make_runtime: RuntimeFactory
) -> None:
    model = agent([lambda _: "hi"])
    run(make_runtime(model).respond(cli_message()))
    specs = {s.name: s for s in model.requests[0].tools}
    assert {"node_create", "node_read", "node_search", "node_supersede", "link_create",
            "link_retract", "node_neighbors", "node_history"} <= set(specs)
    create = specs["node_create"].input_schema
    assert create["required"] == ["kind", "title", "body"]
    assert "Decision" in create["properties"]["kind"]["enum"]


def test_an_unknown_memory_tool_name_gets_a_clear_error(make_runtime: RuntimeFactory) -> None:
    model = agent([lambda _: {"tool_calls": [tool("node_delete", id="x")]},
                   lambda _: "ok"])
    run(make_runtime(model).respond(cli_message()))
    answer = model.requests[1].messages[-1]
    assert answer.is_error and "unknown tool 'node_delete'" in answer.content
    assert "node_supersede" in answer.content


def test_memory_writes_are_gated_by_policy_like_any_mutating_tool(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    def create() -> FunctionModel:
        return agent([lambda _: {"tool_calls": [tool("node_create", kind="Note", title="t",
                                                      body="b")]},
                      lambda _: "done"])
    frozen = Gate(Policy([Rule("freeze", "deny", "memory_frozen", tools=("node_*",),
                               priority=10)]))
    run(make_runtime(create(), gate=frozen).respond(cli_message()))
    run(make_runtime(create(), gate=Gate()).respond(cli_message()))  # the defaults
    decisions = [e.data for e in run(ledger.entries(kinds=["policy.decision"]))]
    assert [(d["tool_name"], d["effect"], d["reason_code"], d["capability"])
            for d in decisions] == [
        ("node_create", "deny", "memory_frozen", "memory.write"),
        ("node_create", "allow", "memory_append_only", "memory.write")]
    assert len(run(ledger.entries(kinds=["node.created"]))) == 1


def test_memory_written_on_one_route_is_found_on_another(ledger: Any) -> None:
    from overt.engine.values import EngineSettings

    allow = Rule("memory.writes", "allow", "memory_writes", "the agent keeps its own memory",
                 tools=("node_*", "link_*"))

    def on(route: str, steps: list[Step]) -> Runtime:
        return Runtime(model=agent(steps), ledger=ledger, gate=Gate(Policy([allow])),
                       settings=EngineSettings(route=route))

    writer = on("default", [
        lambda _: {"tool_calls": [tool("node_create", kind="Resource", title="Staging host",
                                       body="The staging host is Isokron.")]},
        lambda r: "Noted." if r[0]["ok"] else f"failed: {r}"])
    assert run(writer.respond(cli_message("remember the staging host", session="a"))).text \
        == "Noted."
    reader = on("ops", [
        lambda _: {"tool_calls": [tool("node_search", query="staging host")]},
        lambda r: r[0]["results"][0]["title"] if r[0]["results"] else "nothing found"])
    assert run(reader.respond(cli_message("which host is staging?", session="b"))).text \
        == "Staging host"
    created = run(ledger.entries(kinds=["node.created"]))[0]
    started = run(ledger.entries(turn_id=created.turn_id, kinds=["turn.started"]))[0]
    assert started.data["route"] == "default"
    search = run(ledger.entries(kinds=["tool_call.completed"]))[-1]
    assert search.data["tool_status"] == "ok"


KRONICLE_TOML = """\
[memory]
kinds = ["KronicleBlock"]
links = { summarizes = [["KronicleBlock", "*"]] }

[[policy.rules]]
name = "memory-writes"
tools = ["node_*", "link_*"]
effect = "allow"
reason_code = "memory_writes"
"""


def _configured_runtime(tmp_path: Path, ledger_url: str, toml: str,
                        steps: list[Step]) -> tuple[Runtime, FunctionModel]:
    from overt.config.file import load

    (tmp_path / "overt.toml").write_text(f'db = "{ledger_url}"\ntranscript = ""\n{toml}')
    config = load({}, path=tmp_path / "overt.toml")
    model = agent(steps)
    return Runtime.from_config(config, model=model), model


def test_memory_kinds_from_overt_toml_reach_the_agents_memory_tools(
    tmp_path: Path, ledger_url: str
) -> None:
    runtime, model = _configured_runtime(tmp_path, ledger_url, KRONICLE_TOML, [
        lambda _: {"tool_calls": [tool("node_create", kind="KronicleBlock",
                                       title="Week 47", body="Three deploys, one rollback."),
                                  tool("node_create", kind="Decision", title="Freeze Friday",
                                       body="No deploys on Fridays.")]},
        lambda r: {"tool_calls": [tool("link_create", kind="summarizes",
                                       from_id=r[0]["node"]["id"],
                                       to_id=r[1]["node"]["id"])]},
        lambda r: {"tool_calls": [tool("node_search", query="rollback",
                                       kind="KronicleBlock")]},
        lambda r: f"{r[-1]['results'][0]['kind']}: {r[-1]['results'][0]['title']}"])
    try:
        result = run(runtime.respond(cli_message("summarize the week")))
        assert result.error is None and result.text == "KronicleBlock: Week 47"
        create = {s.name: s for s in model.requests[0].tools}["node_create"].input_schema
        assert "KronicleBlock" in create["properties"]["kind"]["enum"]
        statuses = [e.data["tool_status"] for e in run(runtime.ledger.entries(
            kinds=["tool_call.completed"]))]
        assert statuses == ["ok"] * 4
        created = [e.data["node_kind"] for e in run(runtime.ledger.entries(
            kinds=["node.created"]))]
        assert created == ["KronicleBlock", "Decision"]
        assert len(run(runtime.ledger.entries(kinds=["link.created"]))) == 1
    finally:
        run(runtime.close())


def test_without_the_config_kind_the_agent_is_told_the_kind_is_unknown(
    tmp_path: Path, ledger_url: str
) -> None:
    without_memory = KRONICLE_TOML[KRONICLE_TOML.index("[[policy.rules]]"):]
    runtime, _ = _configured_runtime(tmp_path, ledger_url, without_memory, [
        lambda _: {"tool_calls": [tool("node_create", kind="KronicleBlock", title="Week 47",
                                       body="Three deploys.")]},
        lambda r: json.dumps(r[0])])
    try:
        result = run(runtime.respond(cli_message("summarize the week")))
        answer = json.loads(result.text)
        assert answer["ok"] is False and answer["error"]["code"] == "unknown_kind"
        assert "KronicleBlock" not in answer["error"]["known"]
        assert run(runtime.ledger.entries(kinds=["node.created"])) == []
    finally:
        run(runtime.close())
