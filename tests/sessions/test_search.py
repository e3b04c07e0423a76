"""Sessions are found by what their messages and answers say, by time, by channel,
searched by the database on both backends."""

from __future__ import annotations

from typing import Any

from overt.models.fake import FunctionModel, ScriptedModel
from overt.sessions import list_sessions
from tests.conftest import RuntimeFactory, cli_message, run


def ids(found: list[Any]) -> list[str]:
    return [s.session_id for s in found]


def test_a_word_in_any_message_of_a_session_finds_it(make_runtime: RuntimeFactory,
                                                     ledger: Any) -> None:
    runtime = make_runtime(ScriptedModel(["ok", "ok", "ok"]))
    run(runtime.respond(cli_message("Hello there", session="a")))
    run(runtime.respond(cli_message("the Isokron host is down", session="a")))
    run(runtime.respond(cli_message("nothing to see", session="b")))
    assert ids(run(list_sessions(ledger, text="isokron"))) == ["cli:a"]
    assert ids(run(list_sessions(ledger, text="ISOKRON HOST"))) == ["cli:a"]
    assert run(list_sessions(ledger, text="absent everywhere")) == []


def test_a_word_only_the_agent_answered_finds_the_session(make_runtime: RuntimeFactory,
                                                          ledger: Any) -> None:
    runtime = make_runtime(FunctionModel(lambda r: "the answer mentions zephyr"))
    run(runtime.respond(cli_message("a question", session="answered")))
    run(runtime.respond(cli_message("another", session="other")))
    found = ids(run(list_sessions(ledger, text="zephyr")))
    assert found == ["cli:other", "cli:answered"]


def test_text_found_in_no_message_of_the_owners_sessions_finds_none(
        make_runtime: RuntimeFactory, ledger: Any) -> None:
    runtime = make_runtime(ScriptedModel(["ok"]))
    run(runtime.respond(cli_message("a secret word: quartz", session="mine")))
    assert ids(run(list_sessions(ledger, owner="operator:default", text="quartz"))) == [
        "cli:mine"]
    assert run(list_sessions(ledger, owner="mcp_client:x", text="quartz")) == []


def test_text_with_sql_wildcards_quotes_or_japanese_is_matched_as_written(
        make_runtime: RuntimeFactory, ledger: Any) -> None:
    runtime = make_runtime(ScriptedModel(["ok", "ok", "ok"]))
    run(runtime.respond(cli_message("100% it's done_now", session="literal")))
    run(runtime.respond(cli_message("1000 its doneXnow", session="near")))
    run(runtime.respond(cli_message("ホストは落ちた", session="ja")))
    assert ids(run(list_sessions(ledger, text="0% it's done_"))) == ["cli:literal"]
    assert ids(run(list_sessions(ledger, text="落ちた"))) == ["cli:ja"]


def test_sessions_are_found_by_when_they_were_active(make_runtime: RuntimeFactory,
                                                     ledger: Any) -> None:
    runtime = make_runtime(ScriptedModel(["ok"]))
    run(runtime.respond(cli_message("now", session="today")))
    assert ids(run(list_sessions(ledger, since="2000-01-01"))) == ["cli:today"]
    assert run(list_sessions(ledger, since="2999-01-01")) == []
    assert run(list_sessions(ledger, until="2000-01-01")) == []
    assert ids(run(list_sessions(ledger, until="2999-01-01", source="cli"))) == ["cli:today"]
