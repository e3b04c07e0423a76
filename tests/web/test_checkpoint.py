"""The Ledger page shows the newest signed checkpoint and whether its signature
verifies with the configured public key, on both backends."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx2 as httpx

from overt.channels.http import create_app
from overt.events import LedgerCheckpointed
from overt.ledger.base import Ledger
from overt.ledger.signing import PrivateKey, PublicKey
from overt.models.fake import FunctionModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.web import cockpit_routes
from overt.web.pages.checkpoint import check, newest
from tests.conftest import run
from tests.ledger.proofs_helpers import add_turns, make_signer
from tests.web.conftest import GRANTS, RULE, TOKENS, reply
from tests.web.test_auth import log_in


def ledger_page(ledger: Ledger, key: PublicKey | None) -> str:
    async def main() -> str:
        runtime = Runtime(model=FunctionModel(reply), ledger=ledger,
                          gate=Gate(Policy([RULE]), Capabilities(GRANTS)))
        app = create_app(runtime, TOKENS, close_on_shutdown=False,
                         extra_routes=cockpit_routes(runtime, TOKENS, checkpoint_key=key))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://cockpit") as c:
            await log_in(c)
            return (await c.get("/ledger")).text
    return run(main())


def test_a_ledger_without_checkpoints_says_it_has_none(ledger: Ledger) -> None:
    assert "holds no signed checkpoint yet" in ledger_page(ledger, None)


def test_the_newest_checkpoint_is_shown_and_its_signature_verifies(ledger: Ledger,
                                                                   tmp_path: Path) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 4)
    signer.checkpoint(ledger)
    add_turns(ledger, 3)
    latest, _ = signer.checkpoint(ledger)
    html = ledger_page(ledger, signer.public)
    assert "signature verifies" in html and "does not verify" not in html
    assert f"{latest.size:,} entries" in html and latest.head in html
    assert signer.public.key_id in html and latest.time[:19].replace("T", " ") in html


def test_a_checkpoint_signed_by_another_key_does_not_verify(ledger: Ledger,
                                                            tmp_path: Path) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 2)
    signer.checkpoint(ledger)
    other = PrivateKey.generate("test-ledger").public
    html = ledger_page(ledger, other)
    assert "signature does not verify" in html and other.key_id in html


def test_without_a_public_key_the_checkpoint_is_shown_unchecked(ledger: Ledger,
                                                                tmp_path: Path) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 2)
    signer.checkpoint(ledger)
    html = ledger_page(ledger, None)
    assert "signature not checked" in html and "no public key is configured" in html


def test_a_recorded_checkpoint_with_an_altered_field_does_not_verify(ledger: Ledger,
                                                                     tmp_path: Path) -> None:
    signer = make_signer(tmp_path)
    add_turns(ledger, 2)
    signer.checkpoint(ledger)
    found = run(newest(ledger, signer.public))
    assert found is not None and found.verdict == "verified"
    forged = [dataclasses.replace(found.event, tree_size=found.event.tree_size + 1),
              dataclasses.replace(found.event, checkpoint_time="2020-01-01T00:00:00.000000Z"),
              dataclasses.replace(found.event, root_hash="not base64!")]
    verdicts = [check(event, signer.public)[0] for event in forged]
    assert verdicts == ["failed", "failed", "failed"]
    assert isinstance(found.event, LedgerCheckpointed)
