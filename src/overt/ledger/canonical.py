"""The hash-chain contract of the ledger, written down.

Canonical JSON
    ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False)``, encoded as UTF-8. Keys sorted, no whitespace, non-ASCII
    kept as itself, NaN and infinities refused. Two equal values always give the
    same bytes.

Digests
    Always tagged with their algorithm: ``"sha256:" + hexdigest``. A digest with
    another tag is refused by :func:`verify_digest`, never guessed at.

An audit entry
    Seven fields: ``seq`` (1, 2, 3 … with no gap), ``id`` (a ULID), ``kind``
    (``"tool_call.completed"`` …), ``at`` (UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``),
    ``turn_id`` and ``session_id`` (strings or null) and ``data`` (an object of
    identifiers, statuses, numbers and digests; never message text, tool
    arguments or results). Its *payload* is the canonical JSON of the object of
    those seven fields.

The chain
    ``hash(entry) = "sha256:" + sha256(prev_hash + "\\n" + payload)`` where
    ``prev_hash`` is the hash of the entry with ``seq - 1``, and :data:`GENESIS`
    for the first entry. Each entry stores its ``prev_hash`` and ``hash``.

Verification
    Walk entries in ``seq`` order; recompute each payload from the stored
    columns and each hash from the previous *recomputed* hash. The first entry
    whose stored ``prev_hash`` or ``hash`` differs from the recomputation, or
    whose ``seq`` is not the previous plus one, is named. So a changed byte in
    any column, a deleted entry, an inserted one and two swapped ones are all
    caught.

Pruning (retention) may remove a prefix of the chain; it appends a seal entry
naming the last removed ``seq`` and hash, and verification then starts from
that hash instead of :data:`GENESIS`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

ALGORITHM = "sha256"
GENESIS = "sha256:" + "0" * 64


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False)
_quote = _ENCODER.encode  # a string alone: its JSON literal, as inside any canonical text


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value`` (see the module docstring).

    Raises:
        ValueError: ``value`` holds NaN or an infinity, or refers to itself.
        TypeError: ``value`` holds something JSON cannot represent.
    """
    return _ENCODER.encode(value)


def digest_bytes(data: bytes) -> str:
    """The tagged SHA-256 digest of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_text(text: str) -> str:
    """The tagged SHA-256 digest of ``text`` encoded as UTF-8."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest_value(value: Any) -> str:
    """The tagged SHA-256 digest of the canonical JSON of ``value``."""
    return digest_text(canonical_json(value))


def verify_digest(digest: str, text: str) -> bool:
    """Whether ``digest`` is the tagged digest of ``text``; unknown tags are ``False``."""
    algorithm, _, _ = digest.partition(":")
    return algorithm == ALGORITHM and digest == digest_text(text)


def _str_or_null(value: str | None) -> str:
    return "null" if value is None else _quote(value)


def entry_payload(seq: int, id: str, kind: str, at: str, turn_id: str | None,
                  session_id: str | None, data_json: str) -> str:
    """The payload of an entry, from its columns.

    ``data_json`` must already be the canonical JSON of ``data``. The result is
    byte-for-byte ``canonical_json({...the seven fields...})``; it is built by
    hand because ``verify`` runs it once per entry and the generic encoder is
    several times slower. A test holds the two equal.
    """
    return (
        '{"at":' + _quote(at)
        + ',"data":' + data_json
        + ',"id":' + _quote(id)
        + ',"kind":' + _quote(kind)
        + ',"seq":' + str(seq)
        + ',"session_id":' + _str_or_null(session_id)
        + ',"turn_id":' + _str_or_null(turn_id)
        + "}"
    )


def chain_hash(prev_hash: str, payload: str) -> str:
    """The hash of an entry whose predecessor has ``prev_hash``."""
    return "sha256:" + hashlib.sha256((prev_hash + "\n" + payload).encode("utf-8")).hexdigest()
