"""A session's history is rebuilt from the ledger, fitted to the model's window."""

from __future__ import annotations

from typing import Any

from overt.events import TurnStarted
from overt.ledger import open_ledger
from overt.ledger.canonical import digest_text
from overt.ledger.chain import body_text
from overt.ledger.reads.conversations import conversation
from overt.ledger.sql import BODY_WINDOW
from overt.models.fake import FunctionModel, ScriptedModel
from overt.policy.actors import Actor
from overt.runtime import Runtime
from overt.sessions import list_sessions, session_history, session_info, title
from overt.sessions.book import session_owner
from overt.tools.base import tool
from overt.types import Message, ModelRequest
from tests.conftest import ALLOW_ALL, RuntimeFactory, cli_message, run
from tests.ledger.reads.records import ended, started


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-of-{key}"


def said(request: ModelRequest) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in request.messages if m.role != "system"]


def test_a_second_message_reaches_the_model_with_the_first_exchange(
    make_runtime: RuntimeFactory,
) -> None:
    model = FunctionModel(lambda r: f"answer {len(r.messages)}")
    runtime = make_runtime(model)
    run(runtime.respond(cli_message("My host is Isokron.", session="s1")))
    run(runtime.respond(cli_message("What is my host?", session="s1")))
    assert said(model.requests[1]) == [("user", "My host is Isokron."),
                                       ("assistant", "answer 2"),
                                       ("user", "What is my host?")]


def test_other_sessions_are_not_in_the_history(make_runtime: RuntimeFactory) -> None:
    model = FunctionModel(lambda r: "ok")
    runtime = make_runtime(model)
    run(runtime.respond(cli_message("first", session="a")))
    run(runtime.respond(cli_message("second", session="b")))
    assert said(model.requests[1]) == [("user", "second")]


def test_tool_calls_and_their_results_are_in_the_history_in_order(
    make_runtime: RuntimeFactory, ledger: Any,
) -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": "k1"}}]},
                           "k1 is value-of-k1", "noted"])
    runtime = make_runtime(model, tools=[lookup])
    run(runtime.respond(cli_message("look up k1", session="s1")))
    run(runtime.respond(cli_message("thanks", session="s1")))
    history = [m for m in model.requests[2].messages if m.role != "system"]
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1].tool_calls[0].name == "lookup"
    assert dict(history[1].tool_calls[0].arguments) == {"key": "k1"}
    assert history[2].content == "value-of-k1" and not history[2].is_error
    assert history[2].tool_call_id == history[1].tool_calls[0].id
    turns = run(session_history(ledger, "cli:s1"))
    assert len(turns) == 2 and turns[0].messages[-1] == Message("assistant", "k1 is value-of-k1")


def test_a_call_that_ran_while_other_sessions_wrote_thousands_of_entries_keeps_its_arguments(
    make_runtime: RuntimeFactory, ledger: Any,
) -> None:
    """The arguments are stored with the call's start; its completion, which names them
    again, lands after whatever other sessions wrote while the tool ran (here more
    entries than a read searches back through from the completion)."""
    others = BODY_WINDOW // 2 + 1  # turns of another session, two entries each

    @tool(read_only=True)
    async def slow_lookup(key: str) -> str:
        """Look a key up, slowly."""
        for first in range(0, others, 512):
            turns = [f"o{n}" for n in range(first, min(first + 512, others))]
            await ledger.record([e for t in turns for e in (started(t, "cli:other"),
                                                              ended(t, "cli:other", reply="ok"))],
                                {digest_text(b): b for b in (*turns, "ok")})
        return f"value-of-{key}"

    model = ScriptedModel([{"tool_calls": [{"name": "slow_lookup", "arguments": {"key": "k1"}}]},
                           "k1 is value-of-k1", "noted"])
    runtime = make_runtime(model, tools=[slow_lookup])
    run(runtime.respond(cli_message("look up k1", session="s1")))
    done = [e for e in run(conversation(ledger, "cli:s1")) if e.kind == "tool_call.completed"]
    assert [body_text(e.args_body) for e in done] == ['{"key":"k1"}']
    run(runtime.respond(cli_message("thanks", session="s1")))
    history = [m for m in model.requests[2].messages if m.role != "system"]
    assert dict(history[1].tool_calls[0].arguments) == {"key": "k1"}


def test_a_session_continues_after_the_process_restarts(ledger_url: str, tmp_path: Any) -> None:
    first = Runtime(model=ScriptedModel(["Noted: Isokron."]), ledger=open_ledger(ledger_url),
                    tools=[], gate=ALLOW_ALL)
    run(first.respond(cli_message("Remember Isokron.", session="s9")))
    run(first.close())
    model = FunctionModel(lambda r: "It was Isokron.")
    second = Runtime(model=model, ledger=open_ledger(ledger_url), tools=[], gate=ALLOW_ALL)
    try:
        run(second.respond(cli_message("What did I ask you to remember?", session="s9")))
    finally:
        run(second.close())
    assert said(model.requests[0])[:2] == [("user", "Remember Isokron."),
                                          ("assistant", "Noted: Isokron.")]


def test_a_failed_turn_is_not_remembered(make_runtime: RuntimeFactory) -> None:
    def reply(request: ModelRequest) -> str:
        if len(request.messages) == 2 and request.messages[-1].content == "boom":
            raise RuntimeError("model down")
        return "fine"
    model = FunctionModel(reply)
    runtime = make_runtime(model)
    assert run(runtime.respond(cli_message("boom", session="s1"))).error
    run(runtime.respond(cli_message("again", session="s1")))
    assert said(model.requests[-1]) == [("user", "again")]


def test_a_session_too_long_for_the_window_is_answered_with_the_omission_recorded(
    make_runtime: RuntimeFactory, ledger: Any,
) -> None:
    model = FunctionModel(lambda r: "short answer", context_window=1200)
    runtime = make_runtime(model, tools=[], max_output_tokens=100)
    turn_ids = []
    for n in range(8):
        result = run(runtime.respond(cli_message(f"message {n} " + "word " * 120,
                                                 session="long")))
        assert result.error is None
        turn_ids.append(result.turn_id)
    last = model.requests[-1]
    users = [m.content for m in last.messages if m.role == "user"]
    assert users[-1].startswith("message 7") and 1 < len(users) < 8
    inference = run(ledger.entries(turn_id=turn_ids[-1], kinds=["inference"]))[0].data
    kept = len(users) - 1
    # the newest left out (every older one left out too)
    assert inference["history_omitted_through"] == turn_ids[7 - kept - 1]
    assert inference["history_omitted_tokens"] > 0


def test_a_message_too_long_for_any_window_fails_cleanly(
    make_runtime: RuntimeFactory, ledger: Any,
) -> None:
    model = FunctionModel(lambda r: "never", context_window=200)
    result = run(make_runtime(model).respond(cli_message("word " * 500)))
    assert result.error is not None and result.error.kind == "model_error"
    assert result.error.type == "ContextWindowExceeded"
    assert "context window is 200" in result.text
    assert model.requests == []
    completed = run(ledger.entries(kinds=["turn.completed"]))[0].data
    assert completed["status"] == "model_error"


def test_sessions_are_listed_with_owner_turns_and_title(make_runtime: RuntimeFactory,
                                                         ledger: Any) -> None:
    runtime = make_runtime(ScriptedModel(["a", "b", "c"]))
    run(runtime.respond(cli_message("Hello there", session="s1")))
    run(runtime.respond(cli_message("Again", session="s1")))
    run(runtime.respond(cli_message("Other", session="s2")))
    listed = run(list_sessions(ledger))
    assert [s.session_id for s in listed] == ["cli:s2", "cli:s1"]
    s1 = run(session_info(ledger, "cli:s1"))
    assert s1 is not None and s1.turns == 2 and s1.owner == "operator:default"
    assert s1.source == "cli" and run(title(ledger, s1)) == "Hello there"
    assert run(session_info(ledger, "nope")) is None
    assert run(list_sessions(ledger, owner="mcp_client:x")) == []
    assert len(run(list_sessions(ledger, owner="operator:default", limit=1))) == 1


def test_a_turn_whose_caller_names_no_sender_is_the_runtime_operators(ledger: Any) -> None:
    runtime = Runtime(model=ScriptedModel(["hi", "again"]), ledger=ledger, tools=[],
                      gate=ALLOW_ALL, operator=Actor.operator("alice"))
    run(runtime.respond(cli_message("Hello", session="s1")))
    run(runtime.respond(cli_message("Again", session="s1"), actor=Actor.parse("mcp_client:x")))
    started = [e.event(TurnStarted) for e in run(ledger.entries(kinds=[TurnStarted.kind]))]
    assert [t.actor for t in started] == ["operator:alice", "mcp_client:x"]
    assert run(session_owner(ledger, "cli:s1")) == "operator:alice"  # its first turn's
    assert [s.session_id for s in run(list_sessions(ledger, owner="operator:alice"))] == [
        "cli:s1"]
    assert run(list_sessions(ledger, owner="operator:default")) == []


def test_a_history_reader_sees_turns_another_process_appended(ledger_url: str) -> None:
    from overt.sessions import HistoryReader

    async def go() -> None:
        mine = open_ledger(ledger_url)
        other = Runtime(model=ScriptedModel(["one", "two"]), ledger=open_ledger(ledger_url),
                        tools=[], gate=ALLOW_ALL)
        try:
            reader = HistoryReader(mine)
            await other.respond(cli_message("first", session="s"))
            assert [t.messages[0].content for t in await reader.history("cli:s")] == ["first"]
            await other.respond(cli_message("second", session="s"))
            turns = await reader.history("cli:s")
            assert [t.messages[-1].content for t in turns] == ["one", "two"]
            assert list(turns) == await session_history(mine, "cli:s")
            assert list(await reader.history("cli:nobody")) == []
        finally:
            await other.close()
            await mine.close()
    run(go())


def test_a_history_reader_reads_everything_again_after_a_prune(
    make_runtime: RuntimeFactory, ledger: Any,
) -> None:
    from overt.clock import now_iso
    from overt.sessions import HistoryReader

    runtime = make_runtime(ScriptedModel(["old", "new"]), tools=[])
    reader = HistoryReader(ledger)

    async def go() -> None:
        await runtime.respond(cli_message("before", session="s"))
        assert len(await reader.history("cli:s")) == 1
        await ledger.prune(now_iso())
        await runtime.respond(cli_message("after", session="s"))
        turns = await reader.history("cli:s")
        assert [t.messages[0].content for t in turns] == ["after"]
        assert list(turns) == await session_history(ledger, "cli:s")
    run(go())


def test_a_turn_resumed_by_another_process_joins_the_same_history(
    ledger_url: str, tmp_path: Any,
) -> None:
    from overt.models.fake import ScriptedModel as Scripted
    from tests.policy.helpers import PAY, effect_tools, runtime

    log = tmp_path / "payments"
    server = runtime(open_ledger(ledger_url), log, [PAY])
    paused = run(server.respond(cli_message("pay bob 5 dollars", session="pay")))
    assert paused.awaiting_approval
    run(server.close())
    approver = runtime(open_ledger(ledger_url), log, ["Paid bob $5."])
    resumed = run(approver.approve(paused.awaiting_approval))
    assert resumed.result is not None and resumed.result.text == "Paid bob $5."
    run(approver.close())
    model = Scripted(["You paid bob $5."])
    later = Runtime(model=model, ledger=open_ledger(ledger_url), tools=effect_tools(log),
                    gate=ALLOW_ALL)
    try:
        run(later.respond(cli_message("what did you pay?", session="pay")))
    finally:
        run(later.close())
    history = [m for m in model.requests[0].messages if m.role != "system"]
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[0].content == "pay bob 5 dollars"
    assert history[1].tool_calls[0].name == "send_payment"
    assert history[2].content == "sent 500 to bob"
    assert history[3].content == "Paid bob $5."
