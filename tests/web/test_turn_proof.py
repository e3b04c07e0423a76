""""Prove this" on both backends: the proof of a turn in the newest signed checkpoint,
the same file ``overt ledger prove`` writes, and a clear refusal when there is none
to give; another actor's turn is answered as a missing one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx

from overt.channels.http import create_app
from overt.ledger import checkpoints, proofs
from overt.ledger.base import Ledger
from overt.ledger.signing import PublicKey
from overt.models.fake import FunctionModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.web import cockpit_routes
from tests.conftest import run
from tests.ledger.proofs_helpers import make_signer
from tests.web.conftest import CLIENT, GRANTS, RULE, TOKENS, reply
from tests.web.test_auth import log_in
from tests.web.test_pages import ask


def served(ledger: Ledger, key: PublicKey | None) -> tuple[Runtime, httpx.AsyncClient]:
    runtime = Runtime(model=FunctionModel(reply), ledger=ledger,
                      gate=Gate(Policy([RULE]), Capabilities(GRANTS)))
    app = create_app(runtime, TOKENS, close_on_shutdown=False,
                     extra_routes=cockpit_routes(runtime, TOKENS, checkpoint_key=key))
    return runtime, httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                      base_url="http://cockpit")


def test_the_proof_is_the_one_prove_writes_and_it_checks(ledger: Ledger,
                                                         tmp_path: Path) -> None:
    signer = make_signer(tmp_path)

    async def main() -> tuple[Any, str, Any]:
        rt, c = served(ledger, signer.public)
        async with c:
            turn = await ask(rt, "a plain question", "http:proved", "operator:alice")
            checkpoint, note = await checkpoints.make(ledger, signer.key, signer.settings)
            await log_in(c)
            answer = await c.get(f"/turns/{turn.turn_id}/proof.json")
            made = await proofs.prove(ledger, turn.turn_id, note, checkpoint, signer.public)
        return answer, proofs.dump(made), turn
    answer, made, turn = run(main())
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-disposition"].startswith("attachment;")
    assert answer.text == made
    checked = proofs.check(answer.content, signer.public)  # raises when it does not hold
    assert (checked.scope, checked.turn_id) == ("turn", turn.turn_id)


def test_without_a_key_or_a_checkpoint_holding_the_turn_it_says_what_is_missing(
        ledger: Ledger, tmp_path: Path) -> None:
    signer = make_signer(tmp_path)

    async def main() -> list[tuple[int, str]]:
        out = []
        rt, c = served(ledger, None)
        async with c:
            turn = await ask(rt, "a question", "http:unproved", "operator:alice")
            await log_in(c)
            answer = await c.get(f"/turns/{turn.turn_id}/proof.json")
            out.append((answer.status_code, answer.text))
        rt, c = served(ledger, signer.public)
        async with c:
            await log_in(c)
            answer = await c.get(f"/turns/{turn.turn_id}/proof.json")
            out.append((answer.status_code, answer.text))
            await checkpoints.make(ledger, signer.key, signer.settings)
            later = await ask(rt, "after the checkpoint", "http:unproved", "operator:alice")
            answer = await c.get(f"/turns/{later.turn_id}/proof.json")
            out.append((answer.status_code, answer.text))
        return out
    (no_key, no_checkpoint, too_new) = run(main())
    assert no_key[0] == 409 and "no public key is configured" in no_key[1]
    assert no_checkpoint[0] == 409 and "holds no signed checkpoint" in no_checkpoint[1]
    assert too_new[0] == 409 and "after the newest checkpoint" in too_new[1]


def test_another_actors_turn_is_answered_as_a_missing_one(ledger: Ledger,
                                                          tmp_path: Path) -> None:
    async def main() -> list[int]:
        rt, c = served(ledger, make_signer(tmp_path).public)
        async with c:
            theirs = await ask(rt, "alice's", "http:alice", "operator:alice")
            await log_in(c, CLIENT)
            return [(await c.get(path)).status_code for path in (
                f"/turns/{theirs.turn_id}", f"/turns/{theirs.turn_id}/proof.json",
                "/turns/no-such-turn")]
    assert run(main()) == [404, 404, 404]
