"""``add-checkpoint`` (C2SP tlog-witness), without the HTTP: parse the request,
check the log's signature and the consistency proof against the witness's own
memory, cosign, or refuse with the spec's status code.

A refusal that shows misbehaviour (a checkpoint of the size the witness holds with
another root, a proof that does not reach the held root, a size below it) is kept
as evidence beside the checkpoint it conflicts with, and answered with that
checkpoint too: the status line's message, a blank line, then the note the witness
cosigned (signed by the log's own key), so the log's side holds both checkpoints
(:mod:`overt.witness.refusals`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from overt.errors import ForgedSignatureError, LedgerIntegrityError
from overt.ledger import merkle
from overt.ledger.signing import PublicKey, open_note
from overt.witness.notes import WitnessSigner
from overt.witness.state import Evidence, Latest, WitnessState

MAX_PROOF_LINES = 63


@dataclass(frozen=True, slots=True)
class Reply:
    """The HTTP answer: status, content type, body."""

    status: int
    content_type: str
    body: str


def _plain(status: int, message: str) -> Reply:
    return Reply(status, "text/plain; charset=utf-8", message + "\n")


def _conflict(status: int, message: str, held: Latest) -> Reply:
    """A refusal that names the checkpoint it conflicts with: ``held``'s note."""
    return Reply(status, "text/plain; charset=utf-8", f"{message}\n\n{held.note}")


@dataclass(frozen=True, slots=True)
class Request:
    old: int
    proof: list[bytes]
    note: str


def parse_request(body: bytes) -> Request:
    """``old N``, proof lines, a blank line, the signed checkpoint.

    Raises:
        ValueError: malformed (400).
    """
    text = body.decode("utf-8")
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise ValueError("no blank line before the checkpoint")
    lines = head.split("\n")
    first = lines[0].split(" ")
    if len(first) != 2 or first[0] != "old" or not first[1].isdigit() or (
            first[1] != "0" and first[1].startswith("0")):
        raise ValueError("the first line is not 'old <size>'")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise ValueError("too many proof lines")
    proof = []
    for line in lines[1:]:
        try:
            digest = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("a proof line is not base64") from exc
        if len(digest) != 32:
            raise ValueError("a proof line is not a 32-byte hash")
        proof.append(digest)
    return Request(int(first[1]), proof, note)


def _head(body: str) -> tuple[str, int, bytes]:
    lines = body.split("\n")
    if len(lines) < 4 or not lines[1].isdigit() or (lines[1] != "0" and lines[1][0] == "0"):
        raise ValueError("not a checkpoint (origin, size, root)")
    root = base64.b64decode(lines[2], validate=True)
    if len(root) != 32:
        raise ValueError("a checkpoint root is 32 bytes")
    return lines[0], int(lines[1]), root


def add_checkpoint(body: bytes, logs: dict[str, PublicKey], signer: WitnessSigner,
                   state: WitnessState, now: int) -> Reply:
    """Answer one ``add-checkpoint`` request (see the module docstring)."""
    try:
        req = parse_request(body)
        origin = req.note.split("\n", 1)[0]
    except (ValueError, UnicodeDecodeError) as exc:
        return _plain(400, f"malformed request: {exc}")
    key = logs.get(origin)
    if key is None:
        return _plain(404, f"unknown log origin {origin!r}")
    try:
        text = open_note(req.note, key)
    except ForgedSignatureError:
        return _plain(403, "the log's signature does not verify")
    except LedgerIntegrityError as exc:
        return _plain(403, str(exc))
    try:
        _, size, root = _head(text)
    except (ValueError, binascii.Error) as exc:
        return _plain(400, f"malformed checkpoint: {exc}")
    held = state.latest(origin)
    held_size = 0 if held is None else held.size
    if req.old != held_size:
        return Reply(409, "text/x.tlog.size", f"{held_size}\n")
    if size < req.old:
        assert held is not None
        state.record(Evidence(origin, "rollback", held.note, req.note, now))
        return _conflict(400, f"size {size} is below the cosigned size {req.old}: rollback",
                         held)
    if held is not None:
        if size == held.size:
            ok = not req.proof and root == held.root
        else:
            ok = merkle.verify_consistency(held.size, size, held.root, root, req.proof)
        if not ok:
            # same size, another root is a proven fork; a larger size with a failing
            # proof may be a fork or a sender's bad proof, kept all the same
            kind = "fork" if size == held.size else "inconsistent"
            state.record(Evidence(origin, kind, held.note, req.note, now))
            return _conflict(422, "the consistency proof does not hold: a fork or a bad proof",
                             held)
    elif req.proof:
        return _plain(422, "a proof from size 0 is empty")
    if not state.advance(origin, held_size, Latest(size, root, req.note)):
        current = state.latest(origin)
        return Reply(409, "text/x.tlog.size", f"{0 if current is None else current.size}\n")
    return Reply(200, "text/plain; charset=utf-8", signer.cosign(text, now))
