"""An approval is bound to the exact call it was asked for. Someone with write access
to the database who changes the held call after the request was made (its arguments
in the checkpoint, and the digest the request names) does not get the changed call
run on the approval: the resume refuses it, and the refusal is on the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.errors import LedgerIntegrityError
from overt.ledger.base import Ledger
from overt.ledger.canonical import canonical_json, digest_text
from overt.policy.rules import Rule
from tests.backends import Raw
from tests.conftest import run
from tests.ledger.test_tamper_reads import forge_body
from tests.policy.helpers import PAY, ask, runs_of, runtime

FORGED = {"amount": 999_999, "to": "mallory"}


def held_for_approval(ledger: Ledger, log: Path) -> tuple[object, str]:
    rules = [Rule("pay", "ask", "payment_needs_approval", priority=5, tools=("send_payment",))]
    rt = runtime(ledger, log, [PAY, "Sent."], rules=rules)
    result = ask(rt)
    assert result.awaiting_approval is not None
    return rt, result.awaiting_approval


def rewrite(raw: Raw, kind: str, data: dict[str, object]) -> None:
    raw.execute("UPDATE audit_log SET data = ? WHERE kind = ?", (canonical_json(data), kind))


def forge_the_held_call(ledger: Ledger, raw: Raw, *, request_too: bool) -> None:
    """Put a checkpoint holding FORGED where the paused turn's was (and, with
    ``request_too``, the forged arguments' digest in the approval request)."""
    [paused] = run(ledger.entries(kinds=["turn.paused"]))
    [requested] = run(ledger.entries(kinds=["approval.requested"]))
    checkpoint = json.loads(run(ledger.content(paused.data["checkpoint_digest"],
                                               seq=paused.seq)))
    checkpoint["held"]["arguments"] = FORGED
    forged = canonical_json(checkpoint)
    raw.drop_guards()
    forge_body(raw, paused.seq, digest_text(forged), forged)
    forge_body(raw, requested.seq, digest_text(canonical_json(FORGED)), canonical_json(FORGED))
    rewrite(raw, "turn.paused", {**paused.data, "checkpoint_digest": digest_text(forged)})
    if request_too:
        rewrite(raw, "approval.requested",
                {**requested.data, "args_sha256": digest_text(canonical_json(FORGED))})


@pytest.mark.parametrize("request_too", [False, True],
                         ids=["checkpoint_only", "checkpoint_and_request"])
def test_a_held_call_changed_in_the_database_is_refused_on_approval_and_recorded(
    ledger: Ledger, raw: Raw, tmp_path: Path, request_too: bool
) -> None:
    log = tmp_path / "payments"
    rt, request_id = held_for_approval(ledger, log)
    forge_the_held_call(ledger, raw, request_too=request_too)
    with pytest.raises(LedgerIntegrityError):
        run(rt.approve(request_id))  # type: ignore[attr-defined]
    assert runs_of(log) == []  # neither the forged call nor any other ran
    refusals = [e.data for e in run(ledger.entries(kinds=["policy.decision"]))
                if e.data["reason_code"] == "approval_binding_broken"]
    assert len(refusals) == 1
    assert refusals[0]["effect"] == "deny" and refusals[0]["path"] == "resume"
    assert refusals[0]["approval_request_id"] == request_id


def test_every_decision_names_the_policy_in_force_whose_rules_are_stored_once(
    ledger: Ledger, raw: Raw, tmp_path: Path
) -> None:
    from overt.policy.engine import Policy

    rules = [Rule("pay", "ask", "payment_needs_approval", priority=5, tools=("send_payment",))]
    lookup = {"tool_calls": [{"name": "lookup", "arguments": {"query": "x"}}]}
    rt = runtime(ledger, tmp_path / "log", [lookup, "ok", lookup, "ok"], rules=rules)
    ask(rt, "look it up")
    ask(rt, "look it up again")
    decisions = [e.data for e in run(ledger.entries(kinds=["policy.decision"]))]
    policy = Policy(rules)
    assert len(decisions) == 2
    assert {d["policy_digest"] for d in decisions} == {policy.digest}
    stored = json.loads(run(ledger.content(policy.digest)))
    assert [r["name"] for r in stored][:2] == ["pay", "default.read_only"]
    assert stored[0]["tools"] == ["send_payment"] and stored[0]["effect"] == "ask"
    copies = raw.query("SELECT count(*) FROM content_blobs WHERE digest = ?", (policy.digest,))
    assert copies[0][0] == 1
