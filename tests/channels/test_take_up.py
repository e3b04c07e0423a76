"""A running server takes up an approval decided elsewhere that no process resumed
(its process stopped between the decision and the resumption), once the decision
has settled, without waiting for the next worker to start."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from overt.channels.http import create_app
from overt.channels.take_up import take_up_once
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from tests.channels.helpers import TOKENS, uvicorn_server
from tests.conftest import run
from tests.policy.helpers import PAY, ask, runs_of, runtime


def _resumed(ledger: Ledger) -> list[dict[str, Any]]:
    return [e.data for e in run(ledger.entries(kinds=["turn.resumed"]))]


def test_resume_decided_takes_up_a_settled_decision_nobody_took_up_once(
        ledger: Ledger, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    rt = runtime(ledger, log, [PAY, "Paid bob $5."])
    paused = ask(rt)
    pending = runtime(ledger, log, [PAY])
    ask(pending)  # another turn, still pending: not touched
    run(rt.approvals.decide(paused.awaiting_approval, "approved", by=rt.operator))
    assert run(rt.resume_decided(settled_s=3600)) == []  # just decided: its process's
    assert runs_of(log) == []
    [resumed] = run(rt.resume_decided(settled_s=0))
    assert resumed.result is not None and resumed.result.text == "Paid bob $5."
    assert runs_of(log) == ["500 bob"]
    assert run(rt.resume_decided(settled_s=0)) == []  # taken up: never twice
    assert run(take_up_once(rt, settled_s=0)) == 0
    assert [r["request_id"] for r in _resumed(ledger)] == [paused.awaiting_approval]


def test_a_serving_app_takes_up_a_decision_made_elsewhere_while_it_runs(
        ledger: Ledger, ledger_url: str, tmp_path: Path) -> None:
    log = tmp_path / "payments"
    served = runtime(ledger, log, [PAY, "Paid bob $5."])
    paused = ask(served)
    app = create_app(served, TOKENS, take_up_every_s=0.05, take_up_settled_s=0.0,
                     close_on_shutdown=False)
    with uvicorn_server(app):
        # the operator's CLI, its own ledger connection: it decides, then stops
        # before resuming (as a process that lost its ledger at that moment does)
        other = open_ledger(ledger_url)
        try:
            operator = runtime(other, log, [])
            run(operator.approvals.decide(paused.awaiting_approval, "approved",
                                          by=operator.operator))
        finally:
            run(other.close())
        deadline = time.monotonic() + 20
        while not run(ledger.entries(turn_id=paused.turn_id, kinds=["turn.completed"])):
            assert time.monotonic() < deadline, "the server did not take the decision up"
            time.sleep(0.05)
    assert runs_of(log) == ["500 bob"]
    [resumed] = _resumed(ledger)
    assert resumed["request_id"] == paused.awaiting_approval
    assert resumed["pid"] == os.getpid()  # the server (a thread of this process) took it up
    assert run(ledger.verify()).ok
