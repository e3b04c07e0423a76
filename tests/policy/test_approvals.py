"""Human approval: a held call pauses the turn; approve, deny, expire resume it once."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.errors import ApprovalError, NotFoundError
from overt.ledger.base import Ledger
from overt.policy.actors import Actor
from overt.policy.rules import Condition, Rule
from tests.conftest import run
from tests.policy.helpers import PAY, ask, kinds, runs_of, runtime


def test_a_mutating_call_from_the_terminal_pauses_the_turn_for_approval(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY])
    result = ask(rt)
    assert result.awaiting_approval is not None and result.error is None
    assert "approval" in result.text and result.awaiting_approval in result.text
    assert runs_of(log) == []
    assert kinds(ledger, result.turn_id) == [
        "turn.started", "inference", "policy.decision", "approval.requested", "reasoning.step",
        "turn.paused"]
    decision = run(ledger.entries(turn_id=result.turn_id, kinds=["policy.decision"]))[0].data
    assert decision["effect"] == "ask" and decision["rule"] == "default.mutating_needs_approval"
    assert decision["args_sha256"].startswith("sha256:") and "bob" not in str(decision)
    request = run(rt.approvals.get(result.awaiting_approval))
    assert (request.status, request.tool_name, request.actor) == (
        "pending", "send_payment", "agent:default")
    assert request.args_sha256 == decision["args_sha256"]


def test_approve_runs_the_held_call_once_and_the_turn_answers(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "Paid bob $5."])
    paused = ask(rt)
    resumed = run(rt.approve(paused.awaiting_approval, reason="looks right"))
    assert runs_of(log) == ["500 bob"]
    assert resumed.request.status == "approved"
    assert resumed.request.decided_by == "operator:default"
    assert resumed.result is not None and resumed.result.text == "Paid bob $5."
    assert resumed.result.turn_id == paused.turn_id and resumed.result.tools_used == [
        "send_payment"]
    after = kinds(ledger, paused.turn_id)[6:]
    assert after == ["capability.checked", "approval.decided", "turn.resumed", "policy.decision",
                     "tool_call.started", "tool_call.completed", "reasoning.step", "inference",
                     "turn.completed"]
    steps = [e.data for e in run(ledger.entries(turn_id=paused.turn_id,
                                                kinds=["reasoning.step"]))]
    assert [(s["step_number"], s["phase"]) for s in steps] == [
        (0, "waiting_approval"), (1, "execute")]
    assert steps[0]["approval_request_id"] == paused.awaiting_approval
    second = run(ledger.entries(turn_id=paused.turn_id, kinds=["policy.decision"]))[1].data
    assert (second["effect"], second["reason_code"], second["path"]) == (
        "allow", "approved", "resume")
    assert second["approval_request_id"] == paused.awaiting_approval
    assert run(rt.approvals.reason(resumed.request)) == "looks right"
    assert run(ledger.verify()).ok


def test_approving_twice_runs_the_call_once(ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "done"])
    request_id = ask(rt).awaiting_approval
    run(rt.approve(request_id))
    with pytest.raises(ApprovalError, match="already approved"):
        run(rt.approve(request_id))
    with pytest.raises(ApprovalError, match="already approved"):
        run(rt.deny(request_id, reason="too late"))
    assert runs_of(log) == ["500 bob"]


def test_deny_lets_the_model_answer_without_the_tool(ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "OK, I did not pay bob."])
    paused = ask(rt)
    resumed = run(rt.deny(paused.awaiting_approval, reason="not this month"))
    assert runs_of(log) == []
    assert resumed.result is not None and resumed.result.text == "OK, I did not pay bob."
    assert resumed.result.tools_used == []
    completed = run(ledger.entries(turn_id=paused.turn_id, kinds=["tool_call.completed"]))
    assert [(e.data["tool_status"], e.data["reason_code"]) for e in completed] == [
        ("not_allowed", "approval_denied")]
    seen = rt.model.requests[-1].messages[-1]  # type: ignore[attr-defined]
    assert seen.is_error and "approval_denied" in seen.content and "not this month" in seen.content


def test_an_overdue_request_expires_on_the_record_and_the_turn_answers(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "It expired."], ttl_s=-1)
    paused = ask(rt)
    done = run(rt.expire_due())
    assert [d.request.status for d in done] == ["expired"]
    assert done[0].request.decided_by == "system:expiry"
    assert done[0].result is not None and done[0].result.text == "It expired."
    assert runs_of(log) == []
    completed = run(ledger.entries(turn_id=paused.turn_id, kinds=["tool_call.completed"]))
    assert completed[0].data["reason_code"] == "approval_expired"
    with pytest.raises(ApprovalError, match="already expired"):
        run(rt.approve(paused.awaiting_approval))


def test_approving_after_the_expiry_records_the_expiry_instead(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "too late"], ttl_s=-1)
    resumed = run(rt.approve(ask(rt).awaiting_approval))
    assert resumed.request.status == "expired" and runs_of(log) == []


def test_the_policy_is_checked_again_when_the_approved_call_resumes(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    request_id = ask(runtime(ledger, log, [PAY])).awaiting_approval
    stricter = runtime(ledger, log, ["I could not pay."], rules=[
        Rule("freeze", "deny", "payments_frozen", "payments are frozen", priority=10,
             tools=("send_payment",))])
    resumed = run(stricter.approve(request_id))
    assert runs_of(log) == [] and resumed.result is not None
    decisions = run(ledger.entries(kinds=["policy.decision"]))
    assert (decisions[-1].data["effect"], decisions[-1].data["rule"]) == ("deny", "freeze")


def test_an_actor_without_the_capability_cannot_decide(ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY])
    request_id = ask(rt).awaiting_approval
    with pytest.raises(ApprovalError, match=r"approvals\.decide"):
        run(rt.approve(request_id, by=Actor.agent("default")))
    checks = run(ledger.entries(kinds=["capability.checked"]))
    assert (checks[-1].data["granted"], checks[-1].data["actor"]) == (False, "agent:default")
    assert run(rt.approvals.get(request_id)).status == "pending" and runs_of(log) == []


def test_an_unknown_request_is_not_found(ledger: Ledger, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        run(runtime(ledger, tmp_path / "p", []).approve("01NOPE"))


def test_a_quarantined_call_is_held_for_review_while_the_turn_goes_on(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rules = [Rule("big", "quarantine", "large_payment", "payments over $100 are reviewed",
                  priority=5, when=(Condition("amount", "gt", 10_000),))]
    big = {"tool_calls": [{"name": "send_payment", "arguments": {"amount": 50_000, "to": "eve"}}]}
    rt = runtime(ledger, log, [big, "That payment is held for review."], rules=rules)
    result = ask(rt, "pay eve 500 dollars")
    assert result.awaiting_approval is None and result.text == "That payment is held for review."
    assert runs_of(log) == []
    held = run(rt.approvals.list(["pending"]))
    assert [(r.mode, r.reason_code) for r in held] == [("quarantine", "large_payment")]
    released = run(rt.approve(held[0].request_id))
    assert released.released is not None and released.released.status == "ok"
    assert runs_of(log) == ["50000 eve"]
    with pytest.raises(ApprovalError):
        run(rt.approve(held[0].request_id))
    assert runs_of(log) == ["50000 eve"]


def test_a_denied_quarantined_call_never_runs(ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rules = [Rule("all", "quarantine", "review_all", tools=("send_payment",), priority=5)]
    rt = runtime(ledger, log, [PAY, "held"], rules=rules)
    ask(rt)
    request = run(rt.approvals.list(["pending"]))[0]
    closed = run(rt.deny(request.request_id, reason="no"))
    assert closed.released is None and runs_of(log) == []
    assert run(rt.approvals.get(request.request_id)).resumed


def test_a_decided_request_whose_process_died_is_taken_up_once_by_resume_pending(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY])
    request_id = ask(rt).awaiting_approval
    run(rt.approvals.decide(request_id, "approved", by=Actor.operator("alice")))  # then "died"
    later = runtime(ledger, log, ["paid after all"])
    done = run(later.resume_pending())
    assert [d.result.text for d in done if d.result] == ["paid after all"]
    assert run(later.resume_pending()) == [] and runs_of(log) == ["500 bob"]


def test_expiring_without_answering_leaves_the_turn_to_resume_pending(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "It expired."], ttl_s=-1)
    paused = ask(rt)
    [recorded] = run(rt.expire_due(answer=False))
    assert recorded.request.status == "expired" and recorded.result is None
    assert run(ledger.entries(turn_id=paused.turn_id, kinds=["turn.completed"])) == []
    [answered] = run(rt.resume_pending())
    assert answered.result is not None and answered.result.text == "It expired."
