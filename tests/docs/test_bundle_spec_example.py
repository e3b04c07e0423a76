"""The evidence bundle specification's worked example (docs/spec/evidence-bundle.md):
rebuilt from the page's entries and the example key, it is the page's file byte for
byte, and both verifiers accept it and refuse it with any byte changed."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.ledger import bundle, merkle
from overt.ledger.canonical import GENESIS, canonical_json, chain_hash, digest_text, entry_payload
from overt.ledger.checkpoints import ORIGIN_PREFIX, Checkpoint
from overt.ledger.signing import PrivateKey, sign_note

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "spec" / "evidence-bundle.md"
LEDGER_SPEC = ROOT / "docs" / "spec" / "ledger-format.md"
VERIFIER = ROOT / "verifier" / "overt_verify_bundle.py"
KEY = PrivateKey("example", bytes(range(32)))


def blocks(path: Path) -> dict[str, str]:
    found = re.findall(r'^```\w+ title="([^"]+)"\n(.*?)^```', path.read_text(), re.S | re.M)
    return {title: body for title, body in found}


@pytest.fixture(scope="module")
def page() -> dict[str, str]:
    return blocks(SPEC)


def _rebuild(page: dict[str, str]) -> str:
    first = json.loads(blocks(LEDGER_SPEC)["entry 1"])  # the runtime.started before the turn
    shown = [first, *json.loads(page["example entries"])]
    columns: list[dict[str, Any]] = []
    prev = GENESIS
    for e in shown:
        data = canonical_json(e["data"])
        digest = chain_hash(prev, entry_payload(e["seq"], e["id"], e["kind"], e["at"],
                                                e["turn_id"], e["session_id"], data))
        columns.append({**{k: e[k] for k in ("seq", "id", "kind", "at", "turn_id",
                                             "session_id")},
                        "data": data, "prev_hash": prev, "hash": digest})
        prev = digest
    leaves = [merkle.entry_leaf(c["hash"]) for c in columns]
    perfect = merkle.perfect_over(leaves)
    checkpoint = Checkpoint(ORIGIN_PREFIX + leaves[0].hex()[:32], 4, merkle.root(perfect, 4),
                            columns[-1]["hash"], "2026-01-01T00:00:03.000000Z", 0)
    nodes: list[str] = []
    paths = []
    for c in columns[1:]:
        path = []
        for h in merkle.inclusion_proof(perfect, c["seq"] - 1, 4):
            encoded = base64.b64encode(h).decode()
            if encoded not in nodes:
                nodes.append(encoded)
            path.append(nodes.index(encoded))
        paths.append(path)
    turn = columns[1]["turn_id"]
    texts = ("What time is it?", '{"text":"It is noon."}', "It is noon.")
    return bundle.dump({
        "format": "overt-evidence-bundle/1", "scope": "turn", "subject": turn,
        "checkpoint": sign_note(checkpoint.text(), KEY), "key": KEY.public.encode(),
        "cosignatures": [], "turns": [{"turn_id": turn, "turn_entries": 3,
                                        "completed_seq": 4}],
        "entries": columns[1:], "nodes": nodes, "paths": paths,
        "bodies": {digest_text(t): t for t in texts}, "withheld": []})


def test_the_page_s_file_is_the_example_byte_for_byte(page: dict[str, str]) -> None:
    assert page["bundle"] == _rebuild(page)
    assert json.loads(page["example bundle, indented"]) == json.loads(page["bundle"])


def test_both_verifiers_accept_it_and_refuse_it_changed(page: dict[str, str],
                                                         tmp_path: Path) -> None:
    key = tmp_path / "example.pub"
    key.write_text(KEY.public.encode() + "\n")
    path = tmp_path / "turn.json"
    path.write_text(page["bundle"], encoding="utf-8")
    summary = bundle.check(path.read_bytes(), KEY.public)
    assert (summary.turns, summary.entries, summary.input_tokens) == (1, 3, 40)
    done = subprocess.run([sys.executable, "-I", str(VERIFIER), str(path), "--key", str(key)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    shown = SPEC.read_text().split("$ python3 verifier/overt_verify_bundle.py turn.json "
                                   "--key example.pub\n", 1)[1].split("```", 1)[0]
    assert done.stdout == shown
    path.write_text(page["bundle"].replace('"turn_entries":3', '"turn_entries":2'))
    done = subprocess.run([sys.executable, "-I", str(VERIFIER), str(path), "--key", str(key)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "entries of the turn are missing" in done.stdout


WITNESS_SEED = bytes(range(32, 64))
COSIGNED_AT = 1767225603  # 2026-01-01T00:00:03Z


def test_the_page_s_cosignature_is_the_example_s_byte_for_byte(
        page: dict[str, str], tmp_path: Path) -> None:
    """The witness key, the message it signs, its line and the bundle's cosignatures
    entry, rebuilt from the example's seed and timestamp; the cosigned bundle verifies
    under that key with a quorum of one in both verifiers."""
    from overt.witness.notes import WitnessSigner, signed_message, verify_cosignature
    from overt.witness.quorum import Quorum

    made = json.loads(_rebuild(page))
    body = made["checkpoint"].rpartition("\n\n")[0] + "\n"
    signer = WitnessSigner("witness.example", WITNESS_SEED)
    vkey = signer.public.encode()
    line = signer.cosign(body, COSIGNED_AT)
    assert page["example witness key"] == vkey + "\n"
    assert page["cosigned message"].encode() == signed_message(body, COSIGNED_AT)
    assert page["example cosignature line"] == line
    assert verify_cosignature(body, line, signer.public) == COSIGNED_AT
    cosignatures = [{"line": line.rstrip("\n"), "witness": vkey}]
    assert json.loads(page["example cosignatures"]) == cosignatures
    assert page["example cosignatures"] == canonical_json(cosignatures) + "\n"
    made["cosignatures"] = cosignatures
    text = bundle.dump(made)
    path, key = tmp_path / "cosigned.json", tmp_path / "example.pub"
    path.write_text(text, encoding="utf-8")
    key.write_text(KEY.public.encode() + "\n", encoding="ascii")
    summary = bundle.check(text.encode(), KEY.public, Quorum((signer.public,), 1))
    assert summary.cosigners == ["witness.example+790a8a0d"]
    alone = subprocess.run([sys.executable, "-I", str(VERIFIER), str(path), "--key", str(key),
                            "--witness-key", vkey, "--quorum", "1"],
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "cosigned by witness.example+790a8a0d; quorum 1 of 1 keys: met" in alone.stdout
