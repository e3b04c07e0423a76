"""The Messages API wire mapping on its own: overt messages to JSON, reply JSON to overt."""

from __future__ import annotations

from typing import Any

import pytest

from overt.errors import ModelError
from overt.models.anthropic_wire import ReplayStore, from_wire, to_wire
from overt.types import Message, ToolCall


def reply(*content: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "content": list(content),
            "model": "claude-x", "stop_reason": fields.pop("stop_reason", "end_turn"),
            "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 4}, **fields}


def call(call_id: str) -> ToolCall:
    return ToolCall(call_id, "lookup", {"q": call_id})


def test_system_messages_join_into_the_system_parameter_and_roles_alternate() -> None:
    wire = to_wire((Message("system", "rule one"), Message("user", "hello"),
                    Message("system", "rule two"), Message("user", "again"),
                    Message("assistant", ""), Message("user", "third")), ())
    assert wire.system == "rule one\n\nrule two"
    assert wire.messages == [{"role": "user", "content": [
        {"type": "text", "text": "hello"}, {"type": "text", "text": "again"},
        {"type": "text", "text": "third"}]}]  # the empty assistant turn is left out
    assert wire.tools == [] and wire.thinking_allowed and wire.replayed == 0


def test_a_user_message_after_tool_results_joins_them_after_the_results() -> None:
    wire = to_wire((Message("user", "go"), Message("assistant", "", tool_calls=(call("a"),)),
                    Message("tool", "", tool_call_id="a"), Message("user", "and now?")), ())
    assert wire.messages[1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "lookup", "input": {"q": "a"}}]}
    assert wire.messages[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "is_error": False},  # no empty content
        {"type": "text", "text": "and now?"}]}


def test_a_tool_result_without_a_call_id_cannot_be_sent() -> None:
    with pytest.raises(ModelError, match="tool_call_id"):
        to_wire((Message("user", "go"), Message("tool", "x")), ())


def test_reply_blocks_are_taken_apart_and_server_tool_blocks_skipped() -> None:
    taken = from_wire(reply(
        {"type": "text", "text": "a", "citations": None},
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
        {"type": "text", "text": "b"},
        {"type": "tool_use", "id": "t1", "name": "lookup", "input": "not an object"},
        stop_reason="tool_use"))
    assert taken.text == "ab" and taken.stop_reason == "tool_use"
    malformed, = taken.tool_calls
    assert malformed.id == "t1" and malformed.arguments == {} and malformed.malformed
    assert [b["type"] for b in taken.blocks] == ["text", "text", "tool_use"]
    assert taken.blocks[0] == {"type": "text", "text": "a"}  # reply-only fields dropped
    assert (taken.input_tokens, taken.output_tokens) == (3, 4)
    assert taken.info == {"message_id": "msg_1", "api_model": "claude-x"}


def test_only_tool_turns_that_thought_are_kept_for_replay_and_the_oldest_go_first() -> None:
    store = ReplayStore(size=2)
    think = {"type": "thinking", "thinking": "hm", "signature": "s"}
    store.remember(from_wire(reply({"type": "text", "text": "no tools"}, think)))
    store.remember(from_wire(reply({"type": "tool_use", "id": "plain", "name": "n",
                                    "input": {}})))
    assert len(store) == 0
    for call_id in ("a", "b", "c"):
        store.remember(from_wire(reply(think, {"type": "tool_use", "id": call_id,
                                               "name": "lookup", "input": {}})))
    assert len(store) == 2
    assert store.recall(Message("assistant", "", tool_calls=(call("a"),))) is None
    kept = store.recall(Message("assistant", "", tool_calls=(call("c"),)))
    assert kept is not None and kept[0] == think


def test_thinking_is_allowed_unless_the_last_tool_turn_starts_without_a_thinking_block() -> None:
    store = ReplayStore()
    store.remember(from_wire(reply({"type": "redacted_thinking", "data": "xx"},
                                   {"type": "tool_use", "id": "r", "name": "lookup",
                                    "input": {"q": "r"}})))
    open_round = (Message("user", "go"), Message("assistant", "", tool_calls=(call("r"),)),
                  Message("tool", "done", tool_call_id="r"))
    assert not to_wire(open_round, ()).thinking_allowed
    replayed = to_wire(open_round, (), store.recall)
    assert replayed.thinking_allowed and replayed.replayed == 1
    closed = (*open_round, Message("assistant", "answer"), Message("user", "next"))
    assert to_wire(closed, ()).thinking_allowed
