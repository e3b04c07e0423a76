"""Evidence bundles, on both backends: ``overt export --bundle`` makes one, and ``overt
check-bundle`` and the standalone verifier (verifier/overt_verify_bundle.py, run as a
subprocess on every bundle made here) agree on every verdict."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from overt.ledger import bundle
from overt.ledger.canonical import canonical_json
from overt.ledger.signing import write_keys
from tests.ledger.bundle_helpers import (
    VERIFIER,
    Operator,
    flipped,
    load,
    one_turn,
    session,
    standalone,
)


@pytest.fixture
def op(ledger: Any, ledger_url: str, tmp_path: Path,
       capsys: pytest.CaptureFixture[str]) -> Operator:
    return Operator(ledger_url, tmp_path, capsys)


def _write(path: Path, found: dict[str, Any]) -> Path:
    path.write_text(bundle.dump(found), encoding="utf-8")
    return path


def test_a_session_with_tools_an_approval_and_a_memory_write_verifies_both_ways(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    sid = session(ledger, tmp_path)
    # no checkpoint yet: the configured key signs one that holds the session first
    path = op.export("session.json", "--session", sid)
    assert list(op.witness.glob("*.checkpoint"))
    code, out = op.check(path)
    assert code == 0, out
    made = load(path)
    assert made["format"] == "overt-evidence-bundle/1" and made["cosignatures"] == []
    assert [t["turn_entries"] for t in made["turns"]] == [
        sum(1 for e in made["entries"] if e["turn_id"] == t["turn_id"]) for t in made["turns"]]
    kinds = [e["kind"] for e in made["entries"]]
    assert {"approval.requested", "approval.decided", "node.created",
            "tool_call.completed"} <= set(kinds)
    # the memory revision's title and body travel under its entry's digests
    node = json.loads(next(e for e in made["entries"] if e["kind"] == "node.created")["data"])
    assert made["bodies"][node["title_digest"]] == "Pay bob"
    assert "«payé»" in made["bodies"][node["body_digest"]]
    assert made["withheld"] == []
    for word in ("lookup ok x1", "node_create ok x1", "send_payment ok x1",
                 "approved by operator:default", "agent:default", f"session {sid}",
                 "2 whole turns (2 completed)", "output tokens"):
        assert word in out, (word, out)
    alone = standalone(path, op.public)
    assert alone.returncode == 0 and "send_payment approved by operator:default" in alone.stdout


@pytest.mark.slow
def test_a_turn_and_a_time_range_bundle(ledger: Any, op: Operator, tmp_path: Path) -> None:
    sid = session(ledger, tmp_path)
    turns = sorted({e.turn_id for e in _entries(ledger, sid)})
    path = op.export("turn.json", "--turn", turns[0])
    assert op.check(path)[0] == 0
    assert [t["turn_id"] for t in load(path)["turns"]] == [turns[0]]
    path = op.export("range.json", "--since", "2000-01-01")
    assert op.check(path)[0] == 0
    assert load(path)["scope"] == "range" and len(load(path)["turns"]) == 2
    code, _, err = op("export", "--bundle", str(tmp_path / "x.json"), "--turn", "nope")
    assert code == 4 and "no turn" in err
    code, _, err = op("export", "--bundle", str(tmp_path / "x.json"), "--turn", turns[0],
                      "--session", sid)
    assert code == 2
    code, _, err = op("export", "--session", sid)
    assert code == 2 and "--bundle" in err


def _entries(ledger: Any, sid: str) -> list[Any]:
    from tests.conftest import run

    found: list[Any] = run(ledger.entries(session_id=sid))
    return found


@pytest.mark.slow
def test_withheld_bodies_still_verify(ledger: Any, op: Operator, tmp_path: Path) -> None:
    sid = session(ledger, tmp_path)
    full = load(op.export("full.json", "--session", sid))
    path = op.export("redacted.json", "--session", sid, "--withhold-bodies")
    code, out = op.check(path)
    assert code == 0 and f"0 held and checked, {len(full['bodies'])} withheld" in out
    redacted = load(path)
    assert redacted["bodies"] == {} and redacted["withheld"] == sorted(full["bodies"])
    assert "Pay bob" not in path.read_text(encoding="utf-8")
    # a body put back in while still listed as withheld: not what the entries name
    redacted["bodies"] = dict(list(full["bodies"].items())[:1])
    code, out = op.check(_write(tmp_path / "both.json", redacted))
    assert code == 3 and "held and withheld" in out


@pytest.mark.slow
def test_an_entry_removed_fails(ledger: Any, op: Operator, tmp_path: Path) -> None:
    sid = session(ledger, tmp_path)
    made = load(op.export("session.json", "--session", sid))
    for index in (0, 5, len(made["entries"]) - 1):
        cut = json.loads(json.dumps(made))
        gone = cut["entries"].pop(index)
        cut["paths"].pop(index)
        code, out = op.check(_write(tmp_path / f"cut{index}.json", cut))
        assert code == 3, out
        # the removal made consistent: the count lowered, unused nodes dropped
        for turn in cut["turns"]:
            if turn["turn_id"] == gone["turn_id"]:
                turn["turn_entries"] -= 1
        used = sorted({i for p in cut["paths"] for i in p})
        where = {old: new for new, old in enumerate(used)}
        cut["nodes"] = [cut["nodes"][i] for i in used]
        cut["paths"] = [[where[i] for i in p] for p in cut["paths"]]
        code, out = op.check(_write(tmp_path / f"tidy{index}.json", cut))
        assert code == 3 and out.startswith("FAILED"), out


@pytest.mark.slow
def test_a_swapped_body_a_changed_field_and_a_wrong_key_fail(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    sid = session(ledger, tmp_path)
    path = op.export("session.json", "--session", sid)
    made = load(path)
    digests = sorted(made["bodies"])
    swapped = json.loads(json.dumps(made))
    swapped["bodies"][digests[0]], swapped["bodies"][digests[1]] = (
        made["bodies"][digests[1]], made["bodies"][digests[0]])
    code, out = op.check(_write(tmp_path / "swapped.json", swapped))
    assert code == 3 and "does not match its digest" in out
    # every field of every entry and turn changed, one at a time
    variants = []
    for i, entry in enumerate(made["entries"]):
        for name, value in entry.items():
            changed = json.loads(json.dumps(made))
            changed["entries"][i][name] = (value + 1 if isinstance(value, int) else
                                           "x" if value is None else value[:-1] + "!")
            variants.append(changed)
    for i in range(len(made["turns"])):
        for name in ("turn_entries", "completed_seq"):
            changed = json.loads(json.dumps(made))
            changed["turns"][i][name] += 1
            variants.append(changed)
    op.all_fail([_write(tmp_path / f"field{n}.json", v) for n, v in enumerate(variants)])
    changed = json.loads(json.dumps(made))
    changed["cosignatures"] = [{"witness": "w", "cosignature": "c"}]
    assert op.check(_write(tmp_path / "cosigned.json", changed))[0] == 3
    other = tmp_path / "other"
    write_keys(other / "k", other / "k.pub", "overt-ledger")
    code, out = op.check(path, key=other / "k.pub")
    assert code == 3 and "names key" in out


@pytest.mark.slow
def test_every_byte_of_a_small_bundle_flipped_fails_both_verifiers(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    turn = one_turn(ledger)
    path = op.export("small.json", "--turn", turn)
    assert op.check(path)[0] == 0
    paths = flipped(path, tmp_path / "flips")
    op.all_fail(paths)
    assert len(paths) > 2000  # bodies, several entries, a checkpoint and paths


@pytest.mark.slow
@pytest.mark.parametrize("text", [
    b"[" * 100_000 + b"]" * 100_000, b"{" + b'"a":{' * 50_000, b"\xff\xfe garbage",
    b"", b"null\n", b"[]\n", b'{"format":"overt-evidence-bundle/1"}\n',
    ('{"a":' + '"' + "\\ud800" + '"}\n').encode(),
])
def test_garbage_and_deeply_nested_json_exit_3_with_a_message(
        ledger: Any, op: Operator, tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "garbage.json"
    path.write_bytes(text)
    code, out = op.check(path)
    assert code == 3 and out.startswith("FAILED: ") and "Traceback" not in out
    assert standalone(path, op.public).stdout.startswith("INVALID: ")


def test_the_standalone_verifier_is_small_and_imports_no_overt() -> None:
    source = VERIFIER.read_text(encoding="utf-8")
    assert len(source.splitlines()) < 400
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "argparse", "base64", "binascii", "hashlib", "json", "re",
                        "sys", "pathlib", "cryptography"}, imported


def test_canonical_json_is_what_the_verifier_writes() -> None:
    value = {"b": [1, "é\u2028\x7f\x1f"], "a": None}
    import importlib.util

    spec = importlib.util.spec_from_file_location("v", VERIFIER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.canonical(value) == canonical_json(value)


@pytest.mark.slow
def test_a_bundle_carries_the_policy_that_decided_and_a_changed_one_fails(
        ledger: Any, op: Operator, tmp_path: Path) -> None:
    """Each decision names the rules in force (``policy_digest``): the bundle holds
    their text, and a bundle whose policy text is changed, or left out, fails both
    verifiers."""
    sid = session(ledger, tmp_path)
    path = op.export("session.json", "--session", sid)
    made = load(path)
    policies = {json.loads(e["data"])["policy_digest"] for e in made["entries"]
                if e["kind"] == "policy.decision"}
    assert len(policies) == 1
    (policy,) = policies
    assert '"memory.writes"' in made["bodies"][policy]
    assert op.check(path)[0] == 0
    changed = json.loads(json.dumps(made))
    changed["bodies"][policy] = made["bodies"][policy].replace('"allow"', '"deny"', 1)
    gone = json.loads(json.dumps(made))
    del gone["bodies"][policy]
    op.all_fail([_write(tmp_path / "changed.json", changed), _write(tmp_path / "gone.json", gone)])
