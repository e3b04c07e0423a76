"""What the embedded model may choose once it opens a call (pure functions, no weights)."""

from __future__ import annotations

from overt.models.call_choice import (
    DECLINE,
    REPLY,
    callable_tools,
    decline_opening,
    follow_up_figures,
    ids_in,
    invents,
    opens_json_fence,
    restates,
    stale_figures,
)
from overt.models.qwen_chat import call_schema
from overt.types import Message, ToolCall, ToolSpec

A = "01M87ZS9587F06BPR29NGTP8CY"
B = "01M87ZS9587F06BPR29NGTP8D0"

SUPERSEDE = ToolSpec("node_supersede", "Revise a node.", {
    "type": "object", "required": ["id"],
    "properties": {"id": {"type": "string"}, "body": {"type": "string"}}})
LINK = ToolSpec("link_create", "Link two nodes.", {
    "type": "object", "required": ["kind", "from_id", "to_id"],
    "properties": {"kind": {"type": "string", "enum": ["applies_to"]},
                   "from_id": {"type": "string"}, "to_id": {"type": "string"}}})
USAGE = ToolSpec("get_usage", "Usage.", {
    "type": "object", "properties": {"period": {"type": "string"}}})


def test_ids_come_from_messages_and_calls_in_order_and_once() -> None:
    messages = [
        Message("system", f"ignored {A}"),
        Message("user", "What do we have?"),
        Message("assistant", f"Ticket {B} affects {A}; again {B}."),
        Message("assistant", "", tool_calls=(ToolCall("c1", "node_read", {"id": A}),)),
    ]
    assert ids_in(messages) == [B, A]


def test_a_word_glued_to_an_id_is_not_an_id() -> None:
    assert ids_in([Message("user", f"x{A} {A}y and qwen2.5")]) == []


def test_id_arguments_are_limited_to_the_ids_seen() -> None:
    tools = callable_tools([SUPERSEDE, LINK, USAGE], [A, B])
    by = {t.name: t.input_schema["properties"] for t in tools}
    assert by["node_supersede"]["id"] == {"enum": [A, B]}
    assert by["link_create"]["from_id"] == {"enum": [A, B]}
    assert by["link_create"]["kind"] == {"type": "string", "enum": ["applies_to"]}
    assert by["get_usage"]["period"] == {"type": "string"}
    assert SUPERSEDE.input_schema["properties"]["id"] == {"type": "string"}  # not mutated


def test_a_tool_that_needs_an_id_is_left_out_when_none_was_seen() -> None:
    assert [t.name for t in callable_tools([SUPERSEDE, LINK, USAGE, DECLINE], [])] == [
        "get_usage", "cannot_do"]  # (the choices take no id: always callable)


def test_the_constrained_tools_still_make_a_call_schema() -> None:
    schema = call_schema(callable_tools([SUPERSEDE, DECLINE], [A]))
    names = [v["properties"]["name"]["const"] for v in schema["oneOf"]]
    assert names == ["node_supersede", "cannot_do"]


def test_a_reply_opening_a_json_fence_is_taken_for_a_call() -> None:
    assert opens_json_fence('```json\n{"usage": 1')
    assert opens_json_fence("```\n[")
    assert opens_json_fence('  ```JSON\n  {')
    assert not opens_json_fence("```python\nprint(1)")
    assert not opens_json_fence('Here it is:\n```json\n{')
    assert not opens_json_fence("```json\n")  # not yet an object


def test_the_decline_opening_follows_the_operators_language() -> None:
    assert decline_opening([Message("user", "Approve it.")]) == "I cannot do that from here."
    assert decline_opening([Message("user", "English first"),
                            Message("user", "自分を一時停止して。")]).startswith("それは")


def test_an_earlier_answers_figures_are_stale_unless_the_operator_wrote_them() -> None:
    messages = [Message("user", "What did I spend today? More than 1 dollar?"),
                Message("assistant", "Today you spent $0.0500 over 6 inferences, not 1."),
                Message("user", "And over the last 7 days?")]
    stale = stale_figures(messages)
    assert stale == {"0.05", "6"}
    assert restates("Over the last 7 days you spent $0.05.", stale)
    assert restates("Over 6 inferences.", stale)
    assert not restates("17 times 23 is 391, over 1 dollar.", stale)
    assert not restates("v0.0500.1 and x6", stale)
    assert not restates("anything", frozenset())


def test_in_a_follow_up_a_figure_no_message_holds_is_invented() -> None:
    """Asked "How many tokens was that?" after "$0.0920 this week", the 1.5B model
    answered "That was 1 token." without a call."""
    messages = [Message("user", "How much did I spend this week?"),
                Message("assistant", "This week you spent $0.0920 over 9 inferences."),
                Message("user", "How many tokens was that? Under 10 dollars?")]
    said = follow_up_figures(messages)
    assert said == {"0.092", "9", "10"}
    assert invents("That was 1 token.", said)
    assert invents("You spent $0.0920 and 22580 tokens.", said)
    assert not invents("Yes, $0.0920 over 9 inferences is under 10 dollars.", said)
    assert not invents("I would need to look that up.", said)


def test_a_first_question_is_no_follow_up_whatever_it_says() -> None:
    assert follow_up_figures([Message("user", "What is 17 times 23?")]) is None
    assert not invents("391", None)
    tool_round_only = [Message("user", "Spend?"), Message("assistant", ""),
                       Message("user", "What is 17 times 23?")]
    assert follow_up_figures(tool_round_only) is None


def test_optional_enum_filters_without_a_default_are_left_out_of_the_grammar() -> None:
    search = ToolSpec("node_search", "Search.", {
        "type": "object", "additionalProperties": False,
        "properties": {"query": {"type": "string", "default": ""},
                       "kind": {"type": "string", "enum": ["Note", "Ticket"]},
                       "limit": {"type": "integer", "default": 10}}})
    (made,) = callable_tools([search], [])
    assert list(made.input_schema["properties"]) == ["query"]  # an optional limit goes too
    assert made.input_schema["additionalProperties"] is False
    assert "kind" in search.input_schema["properties"]  # the shown schema is unchanged
    (usage,) = callable_tools([ToolSpec("get_usage", "Usage.", {
        "type": "object", "properties": {
            "period": {"type": "string", "enum": ["today", "7d"], "default": "today"}}})], [])
    assert "period" in usage.input_schema["properties"]  # has a default: kept
    assert callable_tools([LINK], [A])[0].input_schema["properties"]["kind"]["enum"] == [
        "applies_to"]  # required: kept
    (paged,) = callable_tools([ToolSpec("page", "Page.", {
        "type": "object", "required": ["limit"],
        "properties": {"limit": {"type": "integer"}}})], [])
    assert "limit" in paged.input_schema["properties"]  # a required limit: kept


def test_questions_and_requests_to_be_shown_ask_orders_do_not() -> None:
    from overt.models.call_choice import asks
    asking = ["How many approvals are waiting for me?", "Is anything waiting on my approval",
              "承認待ちは何件ありますか？", "Show me my usage per day.", "今の稼働状況を教えて。",
              "最近エラーは出てる？", "What did we decide about deploys on Fridays?"]
    ordering = ["Approve the pending deploy request.", "Can you approve the deploy?",
                "自分を一時停止して。", "保留中の承認を全部承認して。", "承認してくれますか？",
                "Raise my daily budget to $50.", "Please delete last week's entries?", ""]
    for text in asking:
        assert asks([Message("user", text)]), text
    for text in ordering:
        assert not asks([Message("user", text)]), text
    # the last operator message counts, not the assistant's
    assert asks([Message("user", "Approve it."), Message("assistant", "I cannot."),
                 Message("user", "Then how many are waiting?")])


def test_a_question_cannot_be_declined_nor_write_in_the_grammar() -> None:
    from overt.models.call_choice import choosable, listing
    read = ToolSpec("node_search", "Search.", {"type": "object", "properties": {}},
                    read_only=True)
    write = ToolSpec("node_create", "Write a node.", {"type": "object", "properties": {}})
    shown = listing([read, write])
    assert [t.name for t in shown] == ["node_search", "node_create", "cannot_do", "reply"]
    assert choosable(shown, [Message("user", "Approve the deploy.")]) == list(shown)
    assert choosable(shown, [Message("user", "Remember that the host is h1.")]) == list(shown)
    for question in ("How many approvals wait?", "What's the staging database host?",
                     "ホスト名を覚えてる？ staging で探して。"):
        # a question may still be answered with no tool ("What is 12% of 250?")
        assert choosable(shown, [Message("user", question)]) == [read, REPLY], question


def test_a_figure_from_nothing_is_one_no_message_holds_when_the_operator_gave_none() -> None:
    from overt.models.call_choice import unsourced

    asked = [Message("user", "What did I spend today?"),
             Message("tool", '{"total_cost_usd": 0.0335}', tool_call_id="c1", name="get_usage"),
             Message("assistant", "Today you spent $0.0335."),
             Message("user", "And yesterday?")]
    assert unsourced("Yesterday you spent $0.75.", asked)
    assert not unsourced("That was $0.0335, today's figure.", asked)  # a message holds it
    assert not unsourced("I cannot see that from here.", asked)  # no figure
    # arithmetic on the operator's own numbers is not from nothing
    assert not unsourced("That is 30.", [Message("user", "What is 12% of 250?")])
    # the system prompt is not a source
    assert unsourced("You have 5 tools.", [Message("system", "At most 5 tool calls."),
                                           Message("user", "How many tools?")])
