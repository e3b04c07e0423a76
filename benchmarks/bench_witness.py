"""A witness cosigning a checkpoint of 1,010,000 entries with the consistency proof
from 1,000,000: parse, the log's signature, the proof, the cosignature and the
SQLite update, as ``POST /add-checkpoint`` runs them (target: under 50 ms)."""

from __future__ import annotations

import base64
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

from overt.ledger import merkle
from overt.ledger.signing import PrivateKey, sign_note
from overt.witness.add import add_checkpoint
from overt.witness.notes import WitnessSigner
from overt.witness.state import Latest, WitnessState

OLD, NEW, RUNS = 1_000_000, 1_010_000, 30
TARGET_MS = 50.0
ORIGIN = "overt/ledger/bench"


def main() -> None:
    leaves = [hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(NEW)]
    perfect = merkle.perfect_over(leaves)
    old_root, new_root = merkle.root(perfect, OLD), merkle.root(perfect, NEW)
    proof = merkle.consistency_proof(perfect, OLD, NEW)
    log = PrivateKey("bench-log", b"\x01" * 32)
    signer = WitnessSigner("bench-witness", b"\x02" * 32)

    def note(size: int, root: bytes) -> str:
        return sign_note(f"{ORIGIN}\n{size}\n{base64.b64encode(root).decode()}\n", log)

    held = note(OLD, old_root)
    body = ("\n".join([f"old {OLD}", *(base64.b64encode(p).decode() for p in proof)])
            + "\n\n" + note(NEW, new_root)).encode()
    logs = {ORIGIN: log.public}
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(RUNS):
            state = WitnessState(Path(tmp) / f"w{i}.sqlite")
            state.advance(ORIGIN, 0, Latest(OLD, old_root, held))
            start = time.perf_counter()
            reply = add_checkpoint(body, logs, signer, state, int(time.time()))
            times.append((time.perf_counter() - start) * 1000)
            state.close()
            if reply.status != 200:
                raise SystemExit(f"the witness refused: {reply.status} {reply.body}")
    median = statistics.median(times)
    print(f"witness add-checkpoint {OLD:,} -> {NEW:,} entries ({len(proof)} proof hashes): "
          f"median {median:.2f} ms, max {max(times):.2f} ms over {RUNS} runs "
          f"(target < {TARGET_MS:.0f} ms: {'ok' if median < TARGET_MS else 'MISSED'})")


if __name__ == "__main__":
    main()
