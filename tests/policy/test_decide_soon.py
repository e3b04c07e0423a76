"""Runtime.decide_soon: the decision is recorded and returned before the paused turn
answers; the turn then answers in the background, once, as approve would make it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overt.errors import ApprovalError, LedgerIntegrityError, UsageError
from overt.events import TurnPaused
from overt.ledger.base import Ledger
from tests.backends import Raw
from tests.conftest import run
from tests.policy.helpers import PAY, ask, kinds, runs_of, runtime


def test_the_decision_is_on_the_record_before_the_turn_goes_on(ledger: Ledger, raw: Raw,
                                                                tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "Paid bob $5."])
    paused = ask(rt)

    async def decide() -> tuple[Any, list[str], list[str], Any]:
        request, task = await rt.decide_soon(paused.awaiting_approval, "approved",
                                             reason="looks right")
        # read without yielding to the event loop, so the turn cannot go on meanwhile
        before = [kind for (kind,) in raw.query(
            "SELECT kind FROM audit_log WHERE turn_id = ? ORDER BY seq", (paused.turn_id,))]
        ran_before = runs_of(log)
        return request, before, ran_before, await task

    request, before, ran_before, resumed = run(decide())
    assert request.status == "approved" and request.decided_by == "operator:default"
    assert before[-1] == "approval.decided" and "turn.resumed" not in before
    assert ran_before == []
    assert resumed.result is not None and resumed.result.text == "Paid bob $5."
    assert runs_of(log) == ["500 bob"]
    assert kinds(ledger, paused.turn_id)[-1] == "turn.completed"
    stored = run(rt.approvals.get(paused.awaiting_approval))
    assert stored.resumed


def test_a_denial_answers_without_the_call(ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "Not paid."])
    paused = ask(rt)

    async def deny() -> Any:
        request, task = await rt.decide_soon(paused.awaiting_approval, "denied")
        assert request.status == "denied"
        return await task

    resumed = run(deny())
    assert resumed.result is not None and resumed.result.text == "Not paid."
    assert runs_of(log) == []


def test_close_waits_for_a_turn_still_being_taken_up(ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "Paid bob $5."])
    paused = ask(rt)

    async def decide_and_close() -> bool:
        _, task = await rt.decide_soon(paused.awaiting_approval, "approved")
        await rt.close()
        return task.done()

    assert run(decide_and_close())
    assert runs_of(log) == ["500 bob"]


def test_a_second_decision_and_a_decision_word_it_does_not_take_are_refused(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "Paid bob $5."])
    paused = ask(rt)
    with pytest.raises(UsageError, match="approved or denied"):
        run(rt.decide_soon(paused.awaiting_approval, "expired"))  # type: ignore[arg-type]
    assert run(rt.approvals.get(paused.awaiting_approval)).status == "pending"

    async def twice() -> None:
        _, task = await rt.decide_soon(paused.awaiting_approval, "approved")
        try:
            with pytest.raises(ApprovalError):
                await rt.decide_soon(paused.awaiting_approval, "denied")
        finally:
            await task

    run(twice())
    assert runs_of(log) == ["500 bob"]


def test_a_changed_checkpoint_is_refused_before_the_decision_is_recorded(
        ledger: Ledger, raw: Any, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "Paid bob $5."])
    paused = ask(rt)
    [pause] = run(ledger.entries(turn_id=paused.turn_id, kinds=["turn.paused"]))
    digest = pause.event(TurnPaused).checkpoint_digest
    raw.drop_guards().execute("UPDATE content_blobs SET body = ? WHERE digest = ?",
                              (b"{}" if raw.pg else "{}", digest))
    with pytest.raises(LedgerIntegrityError, match="does not match its digest"):
        run(rt.decide_soon(paused.awaiting_approval, "approved"))
    assert run(rt.approvals.get(paused.awaiting_approval)).status == "pending"
    assert runs_of(log) == []
