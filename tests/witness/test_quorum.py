"""A quorum counts valid cosignatures from distinct listed keys, and nothing else."""

from __future__ import annotations

import base64

import pytest

from overt.errors import UsageError
from overt.witness.notes import Cosignature, WitnessSigner
from overt.witness.quorum import Quorum, check
from tests import needs

needs.module("cryptography")

BODY = "log.example/q\n5\n" + base64.b64encode(b"\1" * 32).decode() + "\n"
OTHER = "log.example/q\n5\n" + base64.b64encode(b"\2" * 32).decode() + "\n"
W1, W2, W3 = (WitnessSigner(f"w{i}.example", bytes([i]) * 32) for i in (1, 2, 3))


def _lines(*lines: str) -> list[str]:
    return [line.rstrip("\n") for line in lines]


def test_two_valid_cosignatures_meet_a_quorum_of_two():
    found = check(BODY, _lines(W1.cosign(BODY, 1), W2.cosign(BODY, 2)),
                  Quorum((W1.public, W2.public, W3.public), 2))
    assert found.ok and found.missing == (W3.public.label,)


def test_a_forged_cosignature_fails_the_quorum_and_is_named():
    real = Cosignature.parse(W2.cosign(BODY, 2).rstrip("\n"))
    fake = Cosignature.parse(W3.cosign(BODY, 2).rstrip("\n"))
    forged = "\u2014 w2.example " + base64.b64encode(
        real.key_id + (2).to_bytes(8, "big") + fake.signature).decode()
    found = check(BODY, _lines(W1.cosign(BODY, 1), forged),
                  Quorum((W1.public, W2.public), 2))
    assert not found.ok and found.forged and "forged" in found.problem()


def test_a_cosignature_over_another_checkpoint_does_not_count():
    found = check(BODY, _lines(W1.cosign(BODY, 1), W2.cosign(OTHER, 2)),
                  Quorum((W1.public, W2.public), 2))
    assert not found.ok and found.cosigned == (W1.public.label,)


def test_a_key_not_in_the_policy_does_not_count():
    found = check(BODY, _lines(W1.cosign(BODY, 1), W3.cosign(BODY, 3)),
                  Quorum((W1.public, W2.public), 2))
    assert not found.ok and "missing: " + W2.public.label in found.problem()


def test_one_key_cosigning_twice_counts_once():
    found = check(BODY, _lines(W1.cosign(BODY, 1), W1.cosign(BODY, 9)),
                  Quorum((W1.public, W2.public), 2))
    assert not found.ok and found.cosigned == (W1.public.label,)


def test_one_key_listed_twice_cannot_make_a_quorum_of_two():
    with pytest.raises(UsageError, match="distinct"):
        Quorum((W1.public, W1.public), 2)
