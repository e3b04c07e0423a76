"""The ledger format specification's worked example, recomputed from the page's text.

Every value the example shows is read out of ``docs/spec/ledger-format.md`` (its code
blocks, by title) and recomputed here with ``hashlib`` and ``base64`` as the page says,
so a page that disagrees with itself fails. Then overt's own code is held to the same
values, so a page that disagrees with overt fails too.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec" / "ledger-format.md"
GENESIS = "sha256:" + "0" * 64
FIELDS = ("seq", "id", "kind", "at", "turn_id", "session_id", "data")


def blocks() -> dict[str, str]:
    """The page's code blocks that have a title, by title."""
    found = re.findall(r'^```\w+ title="([^"]+)"\n(.*?)^```', SPEC.read_text(), re.S | re.M)
    return {title: body for title, body in found}


@pytest.fixture(scope="module")
def page() -> dict[str, str]:
    return blocks()


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def canonical(value: Any) -> str:
    """Canonical JSON, as the page's "Canonical JSON" section defines it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def entries(page: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for seq in (1, 2, 3):
        entry = json.loads(page[f"entry {seq}"])
        assert sorted(entry) == sorted(FIELDS)
        out.append(entry)
    return out


def test_the_bodies_hash_to_their_digests(page: dict[str, str]) -> None:
    for name in ("message", "reply"):
        body = page[f"body: {name}"].removesuffix("\n")
        assert "sha256:" + hashlib.sha256(body.encode()).hexdigest() == \
            page[f"digest: {name}"].strip()
    es = entries(page)
    assert es[1]["data"]["message_digest"] == page["digest: message"].strip()
    assert es[2]["data"]["reply_digest"] == page["digest: reply"].strip()


def test_each_payload_and_chain_hash_is_as_the_page_says(page: dict[str, str]) -> None:
    prev = GENESIS
    for entry in entries(page):
        seq = entry["seq"]
        payload = canonical(entry)
        assert page[f"payload {seq}"].strip() == payload
        # the page's template: the seven fields in this order, data as its text
        literal = json.dumps
        by_template = ('{"at":' + literal(entry["at"]) + ',"data":' + canonical(entry["data"])
                       + ',"id":' + literal(entry["id"]) + ',"kind":' + literal(entry["kind"])
                       + ',"seq":' + str(seq) + ',"session_id":' + literal(entry["session_id"])
                       + ',"turn_id":' + literal(entry["turn_id"]) + "}")
        assert by_template == payload
        digest = "sha256:" + hashlib.sha256((prev + "\n" + payload).encode()).hexdigest()
        assert page[f"hash {seq}"].strip() == digest
        prev = digest


def _leaf(page: dict[str, str], seq: int) -> bytes:
    return sha256(b"\x00" + page[f"hash {seq}"].strip().encode("ascii"))


def test_the_leaves_the_tree_and_the_checkpoint(page: dict[str, str]) -> None:
    leaves = [_leaf(page, seq) for seq in (1, 2, 3)]
    shown = [line.split()[-1] for line in page["leaves"].splitlines()]
    assert shown == [leaf.hex() for leaf in leaves]
    n01 = sha256(b"\x01" + leaves[0] + leaves[1])
    root = sha256(b"\x01" + n01 + leaves[2])
    tree = dict(line.rsplit(None, 1) for line in page["tree"].splitlines())
    assert tree == {"node_hash(leaf 0, leaf 1)": n01.hex(), "root": root.hex()}

    note = page["checkpoint"]
    body, _, signatures = note.partition("\n\n")
    lines = body.split("\n")
    assert lines == [f"overt/ledger/{leaves[0].hex()[:32]}", "3",
                     base64.b64encode(root).decode(), "head " + page["hash 3"].strip(),
                     lines[4], "pruned 0"]
    assert re.fullmatch(r"time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lines[4])

    name, key_hash_hex, encoded = page["verifier key"].strip().split("+", 2)
    raw = base64.b64decode(encoded)
    assert raw[:1] == b"\x01" and len(raw) == 33
    key_hash = sha256(name.encode() + b"\n" + b"\x01" + raw[1:])[:4]
    assert key_hash.hex() == key_hash_hex
    dash, signer, blob = signatures.strip("\n").split(" ")
    assert (dash, signer) == ("\u2014", name)
    signed = base64.b64decode(blob)
    assert signed[:4] == key_hash and len(signed) == 68
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    Ed25519PublicKey.from_public_bytes(raw[1:]).verify(signed[4:], (body + "\n").encode())


def test_the_proof_shown_is_the_example_s_proof(page: dict[str, str]) -> None:
    proof = json.loads(page["proof"])
    assert proof["checkpoint"] == page["checkpoint"]
    es = entries(page)
    assert [e["seq"] for e in proof["entries"]] == [2, 3]
    for shown, entry in zip(proof["entries"], es[1:], strict=True):
        assert json.loads(shown["data"]) == entry["data"]
        assert shown["data"] == canonical(entry["data"])
        assert {k: shown[k] for k in FIELDS if k != "data"} == \
            {k: entry[k] for k in FIELDS if k != "data"}
        assert shown["hash"] == page[f"hash {shown['seq']}"].strip()
    leaves = [_leaf(page, seq) for seq in (1, 2, 3)]
    n01 = sha256(b"\x01" + leaves[0] + leaves[1])
    nodes = [base64.b64decode(n) for n in proof["nodes"]]
    assert nodes == [leaves[0], leaves[2], n01]
    assert proof["paths"] == [[0, 1], [2]]


def test_overt_agrees_with_the_page(page: dict[str, str]) -> None:
    from overt.ledger import merkle
    from overt.ledger.canonical import canonical_json, chain_hash, entry_payload
    from overt.ledger.chain import verify_rows
    from overt.ledger.checkpoints import Checkpoint
    from overt.ledger.proofs import check, dump
    from overt.ledger.signing import PublicKey

    rows = []
    prev = GENESIS
    for entry in entries(page):
        data = canonical_json(entry["data"])
        payload = entry_payload(entry["seq"], entry["id"], entry["kind"], entry["at"],
                                entry["turn_id"], entry["session_id"], data)
        assert payload == page[f"payload {entry['seq']}"].strip()
        digest = chain_hash(prev, payload)
        rows.append((entry["seq"], entry["id"], entry["kind"], entry["at"], entry["turn_id"],
                     entry["session_id"], data, prev, digest))
        prev = digest
    assert verify_rows(rows).ok
    leaves = [merkle.entry_leaf(row[-1]) for row in rows]
    key = PublicKey.parse(page["verifier key"])
    checkpoint = Checkpoint.open(page["checkpoint"], key)
    assert checkpoint.root == merkle.root(merkle.perfect_over(leaves), 3)
    checked = check(dump(json.loads(page["proof"])).encode(), key)
    assert (checked.size, checked.entries, checked.turn_id) == (3, 2, rows[1][4])
