"""A turn laid out in time from its entries (as recorded on both backends), and
bodies made readable: what the turn page is built from."""

from __future__ import annotations

from typing import Any

from overt.events import (
    InferenceRecorded,
    ToolCallCompleted,
    ToolCallStarted,
    TurnCompleted,
    TurnStarted,
)
from overt.web.readable import FOLD, body, markdown
from overt.web.timeline import Span, lay_out
from tests.conftest import run

T, S = "turn-1", "cli:s"


def inference(model: str, *, escalated: bool = False, reason: str | None = None,
              error: str | None = None) -> InferenceRecorded:
    return InferenceRecorded(
        turn_id=T, session_id=S, inference_id=f"i-{model}", iteration=0, model=model,
        route="default", input_tokens=100, output_tokens=10, cost_usd=0.01, duration_ms=40.0,
        tools_offered=[], tool_calls_requested=0, stop_reason="end_turn",
        response_digest=None, escalated=escalated, escalation_reason=reason, error_type=error)


def started() -> TurnStarted:
    return TurnStarted(turn_id=T, session_id=S, source="cli", caller_session_id="s",
                       message_digest="sha256:00", model="small", route="default",
                       max_tool_calls=5, actor="operator:alice")


def completed(status: str = "completed") -> TurnCompleted:
    return TurnCompleted(turn_id=T, session_id=S, status=status,  # type: ignore[arg-type]
                         reply_digest=None, tools_used=None, tool_calls=1, model_calls=2,
                         input_tokens=200, output_tokens=20, cost_usd=0.02, duration_ms=120.0)


def call(status: str) -> list[Any]:
    return [ToolCallStarted(turn_id=T, session_id=S, tool_call_id="c1", tool_name="node_read",
                            triggered_by="model", caller_session_id="s", args_sha256="sha256:01"),
            ToolCallCompleted(turn_id=T, session_id=S, tool_call_id="c1", tool_name="node_read",
                              triggered_by="model", caller_session_id="s",
                              tool_status=status,  # type: ignore[arg-type]
                              tool_duration_ms=5.0, exc_type=None, args_sha256="sha256:01",
                              result_digest=None)]


def test_an_escalation_shows_both_model_calls_and_why(ledger: Any) -> None:
    run(ledger.record([started()]))
    run(ledger.record([inference("small")]))
    run(ledger.record([inference("large", escalated=True, reason="low_confidence")]))
    run(ledger.record([completed()]))
    line = lay_out(run(ledger.entries(turn_id=T)))
    assert line is not None
    models = [s for s in line.spans if s.kind == "model"]
    assert [(s.title, s.escalated, s.escalation_reason) for s in models] == [
        ("small", False, None), ("large", True, "low_confidence")]
    assert line.verdict() == ("ok", "completed")
    assert line.total_ms >= max(s.end_ms for s in models)
    assert all(s.start_ms >= 0 for s in models)


def test_a_completed_turn_with_a_failed_call_is_not_green(ledger: Any) -> None:
    run(ledger.record([started()]))
    run(ledger.record(call("execution_error")))
    run(ledger.record([completed()]))
    line = lay_out(run(ledger.entries(turn_id=T)))
    assert line is not None
    (span,) = line.spans
    assert (span.tone, span.status) == ("bad", "execution_error")
    assert line.verdict() == ("bad", "completed · execution error")


def test_a_call_that_answered_it_found_nothing_makes_the_turn_red(ledger: Any) -> None:
    run(ledger.record([started()]))
    run(ledger.record(call("ok")))
    run(ledger.record([completed()]))
    line = lay_out(run(ledger.entries(turn_id=T)))
    assert line is not None
    span: Span = line.spans[0]
    assert line.verdict() == ("ok", "completed")
    assert line.verdict({span.anchor}) == ("bad", "completed · node_read found nothing")


def test_a_model_error_is_red_and_says_so(ledger: Any) -> None:
    run(ledger.record([started()]))
    run(ledger.record([inference("small", error="ModelError")]))
    run(ledger.record([completed("model_error")]))
    line = lay_out(run(ledger.entries(turn_id=T)))
    assert line is not None
    assert line.spans[0].tone == "bad"
    assert line.verdict() == ("bad", "model error")


def test_markdown_is_rendered_and_raw_html_or_script_links_are_not() -> None:
    html = str(markdown("**b** <img src=x onerror=alert(1)> [x](javascript:alert(1))"))
    assert "<strong>b</strong>" in html
    assert "<img" not in html and "&lt;img" in html
    assert 'href="javascript' not in html


def test_json_is_folded_escaped_and_long_values_show_their_size() -> None:
    html = str(body('{"a": {"b": {"c": 1}}, "s": "<b>", "long": "' + "x" * (FOLD + 5) + '"}'))
    assert html.count("<details class=\"j\" open>") == 2  # two levels open
    assert html.count("<details class=\"j\">") == 1  # the third folded
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert f"{FOLD + 5:,} chars" in html


def test_node_ids_in_a_memory_result_become_links_and_text_stays_text() -> None:
    node = "01J8ZZZZZZZZZZZZZZZZZZZZZZ"
    linked = str(body(f'{{"ok": true, "node": {{"id": "{node}"}}}}', links=True))
    assert f'href="/memory/{node}"' in linked
    assert "href" not in str(body(f'{{"id": "{node}"}}'))
    assert str(body("not json <i>")).startswith('<pre class="plain">not json &lt;i&gt;')


def test_a_plain_line_renders_as_markdown_it_renders_it() -> None:
    from overt.web.readable import _parser
    for text in ["An answer of a typical length to: question 9 about the plan",
                 "ホストは落ちた。", "x - y = 3.5 (approx.)", "1. a list", "- item",
                 "# title", "> quote", "a *b*", "a & b", "   padded", "tab\there",
                 "2) two", "she said \"hi\" and it's done", "http://example.com/a_b",
                 "+ plus", "=== ", "a\\b", ""]:
        assert str(markdown(text)) == _parser().render(text), text
