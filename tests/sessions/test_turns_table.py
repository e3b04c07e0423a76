"""Turns as table rows, paged by keyset in each order, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from overt.errors import UsageError
from overt.models.fake import FunctionModel
from overt.sessions.turns_table import Cursor, list_turns
from overt.types import ModelRequest, ModelResponse, ToolCall, Usage
from tests.conftest import RuntimeFactory, cli_message, run


def reply(request: ModelRequest) -> ModelResponse:
    """``boom`` in the message: a call to a tool nobody offered (a failed call);
    otherwise an answer whose size grows with the message."""
    last = request.messages[-1]
    asked = [m.content for m in request.messages if m.role == "user"][-1]
    if "boom" in asked and last.role == "user":
        return ModelResponse("", tool_calls=(ToolCall("c1", "no_such_tool", {}),),
                             usage=Usage(10, 5))
    return ModelResponse(f"re: {asked}", usage=Usage(10 * len(asked), 5))


def turns(make_runtime: RuntimeFactory) -> list[str]:
    runtime = make_runtime(FunctionModel(reply, name="function"))
    asked = ["a", "boom one", "ccc", "dddd", "boom two", "f"]
    return [run(runtime.respond(cli_message(m, session=f"s{i % 2}"))).turn_id
            for i, m in enumerate(asked)]


def all_pages(ledger: Any, **kw: Any) -> list[list[str]]:
    pages, after = [], None
    while True:
        rows = run(list_turns(ledger, after=after, limit=2, **kw))
        if not rows:
            return pages
        pages.append([r.turn_id for r in rows])
        after = Cursor(*rows[-1].key)


def test_pages_by_keyset_walk_every_turn_once_newest_first(make_runtime: RuntimeFactory,
                                                           ledger: Any) -> None:
    made = turns(make_runtime)
    pages = all_pages(ledger)
    assert [t for p in pages for t in p] == made[::-1]
    assert [len(p) for p in pages] == [2, 2, 2]
    assert [t for p in all_pages(ledger, order="oldest") for t in p] == made


def test_a_row_carries_channel_cost_latency_tools_and_status(make_runtime: RuntimeFactory,
                                                             ledger: Any) -> None:
    made = turns(make_runtime)
    rows = {r.turn_id: r for r in run(list_turns(ledger, limit=10))}
    boom = rows[made[1]]
    assert boom.source == "cli" and boom.session_id == "cli:s1"
    assert boom.tool_calls == 1 and boom.status == "completed" and boom.failures == 1
    assert rows[made[0]].failures == 0
    assert boom.duration_ms is not None and boom.cost_usd is not None
    assert rows[made[0]].input_tokens == 10


def test_the_errors_view_lists_each_turn_with_a_failure_once_newest_first(
        make_runtime: RuntimeFactory, ledger: Any) -> None:
    made = turns(make_runtime)
    pages = all_pages(ledger, order="errors")
    assert [t for p in pages for t in p] == [made[4], made[1]]


def test_cost_order_pages_from_the_dearest_turn(make_runtime: RuntimeFactory,
                                               ledger: Any) -> None:
    made = turns(make_runtime)
    walked = [t for p in all_pages(ledger, order="cost") for t in p]
    assert sorted(walked) == sorted(made) and len(walked) == len(made)
    costs = [r.cost_usd for r in run(list_turns(ledger, order="cost", limit=10))]
    assert costs == sorted(costs, reverse=True)


def test_filters_keep_only_a_channel_and_a_set_of_sessions(make_runtime: RuntimeFactory,
                                                           ledger: Any) -> None:
    made = turns(make_runtime)
    assert run(list_turns(ledger, source="http")) == []
    found = [r.turn_id for r in run(list_turns(ledger, sessions={"cli:s0"}, limit=10))]
    assert found == [made[4], made[2], made[0]]
    assert run(list_turns(ledger, sessions=set())) == []


def test_an_unknown_order_or_a_cursor_it_did_not_write_is_refused(ledger: Any) -> None:
    with pytest.raises(UsageError, match="unknown order"):
        run(list_turns(ledger, order="sideways"))  # type: ignore[arg-type]
    for bad in ("yesterday", "1.0:99999999999999999999", "nan:3", "inf:3", "1:-2"):
        with pytest.raises(UsageError, match="not one this table wrote"):
            Cursor.parse(bad)
    assert Cursor.parse(Cursor(1.5, 7).text()) == Cursor(1.5, 7)


def test_cost_order_since_a_time_reads_only_the_turns_ended_since(
        make_runtime: RuntimeFactory, ledger: Any) -> None:
    made = turns(make_runtime)
    assert run(list_turns(ledger, order="duration", since="2999-01-01")) == []
    found = run(list_turns(ledger, order="cost", since="2000-01-01", limit=10))
    assert sorted(r.turn_id for r in found) == sorted(made)


def test_dearest_and_slowest_first_walk_their_index(make_runtime: RuntimeFactory,
                                                   ledger: Any, raw: Any) -> None:
    turns(make_runtime)
    said: list[tuple[str, list[Any]]] = []
    select = ledger.select

    async def spy(statement: str, params: Any = ()) -> Any:
        said.append((statement, list(params)))
        return await select(statement, params)
    ledger.select = spy
    for order, index in (("cost", "audit_log_turn_cost"), ("duration", "audit_log_turn_duration")):
        said.clear()
        first = run(list_turns(ledger, order=order, limit=2))
        run(list_turns(ledger, order=order, after=Cursor(*first[-1].key), limit=2,
                       since="2000-01-01"))
        if not raw.pg:  # the plan: a range of the index, not every turn.completed
            statement, params = said[-2]  # the page's read (the last counts failures)
            plan = raw.query("EXPLAIN QUERY PLAN " + statement, params)
            assert index in str(plan), plan
