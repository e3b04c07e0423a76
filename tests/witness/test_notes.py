"""cosignature/v1 lines and witness keys, checked against C2SP tlog-cosignature."""

from __future__ import annotations

import pytest

from overt.errors import ForgedSignatureError, LedgerIntegrityError, UsageError
from overt.ledger.signing import PrivateKey, sign_note
from overt.witness.notes import (
    Cosignature,
    WitnessKey,
    WitnessSigner,
    signed_message,
    valid_cosigners,
    verify_cosignature,
)
from tests import needs

needs.module("cryptography")

BODY = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
# The witness line of the spec's example checkpoint.
SPEC_LINE = ("\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI"
             "5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==")


def _signer(name: str = "witness.example.com/w1", byte: int = 7) -> WitnessSigner:
    return WitnessSigner(name, bytes([byte]) * 32)


def test_the_spec_example_line_parses_to_its_key_id_and_the_time_of_its_message_example():
    cosig = Cosignature.parse(SPEC_LINE)
    assert cosig.name == "witness.example.com/w1"
    assert cosig.key_id.hex() == "8d66cf3f"
    assert cosig.timestamp == 1679315147  # the "time 1679315147" of the spec's message


def test_the_signed_message_is_header_time_line_then_the_body():
    assert signed_message(BODY, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\n" + BODY.encode())


def test_a_cosignature_verifies_under_its_key_and_returns_its_time():
    signer = _signer()
    line = signer.cosign(BODY, 1700000000)
    assert verify_cosignature(BODY, line, signer.public) == 1700000000


def test_a_forged_cosignature_is_refused():
    signer = _signer()
    line = signer.cosign(BODY, 1700000000)
    forged = _signer(byte=8).cosign(BODY, 1700000000)
    # the forger's blob under the true signer's name and key id
    blob_true = Cosignature.parse(line.rstrip("\n"))
    blob_forged = Cosignature.parse(forged.rstrip("\n"))
    import base64
    spliced = base64.b64encode(blob_true.key_id + (1700000000).to_bytes(8, "big")
                               + blob_forged.signature).decode()
    with pytest.raises(ForgedSignatureError):
        verify_cosignature(BODY, f"\u2014 {signer.name} {spliced}\n", signer.public)


def test_a_cosignature_over_another_checkpoint_is_refused():
    signer = _signer()
    line = signer.cosign(BODY, 1700000000)
    other = BODY.replace("20852163", "20852164")
    with pytest.raises(ForgedSignatureError):
        verify_cosignature(other, line, signer.public)


def test_a_changed_timestamp_breaks_the_cosignature():
    import base64
    signer = _signer()
    cosig = Cosignature.parse(signer.cosign(BODY, 1700000000).rstrip("\n"))
    moved = base64.b64encode(cosig.key_id + (1700000001).to_bytes(8, "big")
                             + cosig.signature).decode()
    with pytest.raises(ForgedSignatureError):
        verify_cosignature(BODY, f"\u2014 {signer.name} {moved}", signer.public)


def test_a_cosignature_by_a_key_not_in_the_policy_is_not_counted():
    listed, stranger = _signer("w1.example", 1), _signer("w2.example", 2)
    log = PrivateKey("log.example", b"\x09" * 32)
    note = sign_note(BODY, log) + stranger.cosign(BODY, 1700000000)
    assert valid_cosigners(note, [listed.public]) == set()
    assert valid_cosigners(note, [stranger.public]) == {stranger.public}


def test_one_key_cosigning_twice_counts_once():
    signer = _signer("w1.example", 1)
    log = PrivateKey("log.example", b"\x09" * 32)
    note = (sign_note(BODY, log) + signer.cosign(BODY, 1700000000)
            + signer.cosign(BODY, 1700000005))
    assert valid_cosigners(note, [signer.public, signer.public]) == {signer.public}


def test_a_log_key_cannot_pose_as_a_witness_key():
    # same name, same Ed25519 key: the 0x01 log signature line is not a cosignature
    log = PrivateKey("w1.example", b"\x01" * 32)
    note = sign_note(BODY, log)
    assert valid_cosigners(note, [_signer("w1.example", 1).public]) == set()


def test_vkey_round_trips_and_names_type_0x04():
    key = _signer().public
    assert WitnessKey.parse(key.encode()) == key
    import base64
    name, key_id, material = key.encode().split("+", 2)
    assert (name, key_id) == ("witness.example.com/w1", key.key_id.hex())
    assert base64.b64decode(material)[:1] == b"\x04"


def test_a_log_vkey_is_not_a_witness_vkey():
    with pytest.raises(UsageError, match="0x04"):
        WitnessKey.parse(PrivateKey("log.example", b"\x09" * 32).public.encode())


def test_a_vkey_with_a_wrong_key_id_is_refused():
    text = _signer().public.encode()
    name, _, rest = text.split("+", 2)
    with pytest.raises(UsageError, match="key ID"):
        WitnessKey.parse(f"{name}+00000000+{rest}")


def test_signer_key_round_trips():
    signer = _signer()
    assert WitnessSigner.parse(signer.encode()) == signer


def test_a_truncated_cosignature_line_is_malformed():
    with pytest.raises(LedgerIntegrityError, match="76 bytes"):
        Cosignature.parse("\u2014 w AAAA")
