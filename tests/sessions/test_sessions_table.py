"""Sessions as table rows with their sums, paged by keyset, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from overt.errors import UsageError
from overt.models.fake import FunctionModel
from overt.sessions.sessions_table import list_session_rows
from tests.conftest import RuntimeFactory, cli_message, run
from tests.sessions.test_turns_table import reply


def sessions(make_runtime: RuntimeFactory) -> list[str]:
    """Four sessions, started in this order; b and d hold a failed call."""
    runtime = make_runtime(FunctionModel(reply, name="function"))
    for text, session in [("a", "a"), ("boom b", "b"), ("c", "c"), ("more a", "a"),
                          ("d", "d"), ("boom d", "d")]:
        run(runtime.respond(cli_message(text, session=session)))
    return ["cli:a", "cli:b", "cli:c", "cli:d"]


def pages(ledger: Any, **kw: Any) -> list[list[str]]:
    out, after = [], None
    while rows := run(list_session_rows(ledger, after=after, limit=2, **kw)):
        out.append([r.session_id for r in rows])
        after = rows[-1].key
    return out


def test_pages_walk_every_session_once_by_when_it_started(make_runtime: RuntimeFactory,
                                                          ledger: Any) -> None:
    made = sessions(make_runtime)
    assert pages(ledger) == [["cli:d", "cli:c"], ["cli:b", "cli:a"]]
    assert [s for p in pages(ledger, order="oldest") for s in p] == made


def test_a_row_sums_its_sessions_turns_cost_time_calls_and_failures(
        make_runtime: RuntimeFactory, ledger: Any) -> None:
    sessions(make_runtime)
    rows = {r.session_id: r for r in run(list_session_rows(ledger, limit=10))}
    assert rows["cli:a"].turns == 2 and rows["cli:a"].failures == 0
    assert rows["cli:d"].turns == 2 and rows["cli:d"].failures == 1
    assert rows["cli:d"].tool_calls == 1 and rows["cli:b"].tool_calls == 1
    assert rows["cli:a"].duration_ms > 0 and rows["cli:a"].source == "cli"
    assert rows["cli:a"].owner == "operator:default"
    assert rows["cli:a"].last_at >= rows["cli:a"].started_at


@pytest.mark.slow
def test_errors_first_lists_the_sessions_with_a_failure_newest_first(
        make_runtime: RuntimeFactory, ledger: Any) -> None:
    sessions(make_runtime)
    assert pages(ledger, order="errors") == [["cli:d", "cli:b"]]


def test_filters_by_channel_owner_and_reachable_sessions(make_runtime: RuntimeFactory,
                                                         ledger: Any) -> None:
    sessions(make_runtime)
    assert run(list_session_rows(ledger, source="http")) == []
    assert run(list_session_rows(ledger, owner="mcp_client:x")) == []
    found = run(list_session_rows(ledger, sessions={"cli:a", "cli:c"}))
    assert [r.session_id for r in found] == ["cli:c", "cli:a"]
    assert len(run(list_session_rows(ledger, owner="operator:default"))) == 4


def test_an_unknown_order_is_refused(ledger: Any) -> None:
    with pytest.raises(UsageError, match="unknown order"):
        run(list_session_rows(ledger, order="cost"))  # type: ignore[arg-type]
