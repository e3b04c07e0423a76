from __future__ import annotations

import hashlib
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overt.ledger.canonical import (
    GENESIS,
    canonical_json,
    chain_hash,
    digest_text,
    digest_value,
    entry_payload,
    verify_digest,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)

ENTRY_FIELDS = {
    "seq": st.integers(min_value=1, max_value=2**53), "entry_id": st.text(min_size=1),
    "kind": st.text(min_size=1), "at": st.text(), "turn_id": st.none() | st.text(),
    "session_id": st.none() | st.text(),
    "data": st.dictionaries(st.text(), json_values, max_size=5),
}
"""An entry's seven fields, each any value its column may hold."""


def test_canonical_json_sorts_keys_and_has_no_whitespace() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == '{"a":[1,{"c":3,"d":2}],"b":1}'


def test_canonical_json_keeps_non_ascii_as_itself() -> None:
    assert canonical_json({"k": "思考 é"}) == '{"k":"思考 é"}'


def test_canonical_json_refuses_nan_and_infinity() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})
    with pytest.raises(ValueError):
        canonical_json([math.inf])


@pytest.mark.slow
@given(json_values)
def test_equal_values_give_equal_canonical_bytes(value: object) -> None:
    assert canonical_json(json.loads(canonical_json(value))) == canonical_json(value)


@pytest.mark.slow
@given(json_values)
def test_canonical_json_is_the_documented_json_dumps(value: object) -> None:
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"),
                                               ensure_ascii=False, allow_nan=False)


def test_a_value_json_cannot_hold_is_refused_as_json_refuses_it() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular"):
        canonical_json({"x": cyclic})
    with pytest.raises(TypeError):
        canonical_json({"x": object()})
    with pytest.raises(TypeError):
        canonical_json({(1, 2): "tuple key"})


def test_digests_are_tagged_with_their_algorithm() -> None:
    assert digest_text("abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert digest_value({"a": 1}) == digest_text('{"a":1}')


def test_verify_digest_refuses_an_unknown_algorithm_tag() -> None:
    assert verify_digest(digest_text("x"), "x")
    assert not verify_digest("md5:" + hashlib.md5(b"x").hexdigest(), "x")
    assert not verify_digest(digest_text("x"), "y")


@pytest.mark.slow
@given(**ENTRY_FIELDS)
def test_entry_payload_is_the_canonical_json_of_the_seven_fields(
    seq: int, entry_id: str, kind: str, at: str, turn_id: str | None, session_id: str | None,
    data: dict[str, object],
) -> None:
    expected = canonical_json({"seq": seq, "id": entry_id, "kind": kind, "at": at,
                               "turn_id": turn_id, "session_id": session_id, "data": data})
    assert entry_payload(seq, entry_id, kind, at, turn_id, session_id,
                         canonical_json(data)) == expected


def test_each_hash_covers_the_previous_hash_and_the_payload() -> None:
    first = chain_hash(GENESIS, "{}")
    assert first == "sha256:" + hashlib.sha256((GENESIS + "\n{}").encode()).hexdigest()
    assert chain_hash(first, "{}") != first
    assert chain_hash(GENESIS, '{"a":1}') != first


@pytest.mark.slow
@given(**ENTRY_FIELDS)
def test_verify_builds_the_preimage_the_chain_hashed(
    seq: int, entry_id: str, kind: str, at: str, turn_id: str | None, session_id: str | None,
    data: dict[str, object],
) -> None:
    """``verify_rows`` builds each preimage from the stored columns itself: it passes an
    entry hashed over the canonical JSON of its seven fields, and fails one whose
    kind then changed."""
    from overt.ledger.chain import verify_rows

    prev = GENESIS if seq == 1 else "sha256:" + "1" * 64  # else sealed by a prune
    digest = chain_hash(prev, canonical_json({
        "seq": seq, "id": entry_id, "kind": kind, "at": at, "turn_id": turn_id,
        "session_id": session_id, "data": data}))
    row = (seq, entry_id, kind, at, turn_id, session_id, canonical_json(data), prev, digest)
    anchors = {seq - 1: prev}
    assert verify_rows([row], anchors).ok
    changed = (*row[:2], kind + "x", *row[3:])
    report = verify_rows([changed], anchors)
    assert not report.ok and report.problem == "hash does not match the entry's contents"
