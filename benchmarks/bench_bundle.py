"""Issue 38: an evidence bundle of a 200-turn session, bodies included, with a ledger of
1,000,000 entries behind it (SQLite).

- made (``overt export --bundle``'s work, the checkpoint already signed): target under 2 s;
- checked offline (``overt check-bundle``'s work): target under 1 s, and the standalone
  verifier (verifier/overt_verify_bundle.py) on the same file;
- size: at most 1.5 times its bodies plus its entries (the nine columns of each, as
  canonical JSON).

The checkpoint carries the cosignatures of three witness keys (made here, as the
witnesses would), and both checks hold the bundle to a quorum of two of them.

The 1,000,000 entries are bench_proofs' cached ledger (built once, about a minute);
each session turn asks, calls one read-only tool, and answers. Another size:
``OVERT_BENCH_PROOFS_ENTRIES``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._stats import row
from benchmarks.bench_proofs import ENTRIES, Timer, _cached_ledger
from overt.ledger import bundle, checkpoints, signing
from overt.ledger.canonical import canonical_json
from overt.ledger.checkpoints import CheckpointSettings
from overt.ledger.sqlite import SqliteLedger
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import IncomingMessage
from overt.witness.client import cosignatures_path, read_cosignatures
from overt.witness.notes import WitnessSigner
from overt.witness.quorum import Quorum

TURNS = 200
VERIFIER = Path(__file__).resolve().parents[1] / "verifier" / "overt_verify_bundle.py"


@tool(read_only=True)
def lookup(query: str) -> str:
    """Look an order up."""
    return f"order {query}: shipped on 2026-11-20, 3 items, tracking ZX{len(query) * 7919}"


async def _session(ledger: Any) -> str:
    replies: list[Any] = []
    for i in range(TURNS):
        replies += [{"tool_calls": [{"name": "lookup", "arguments": {"query": f"A-{i:05d}"}}]},
                    f"Order A-{i:05d} shipped on 2026-11-20; it has 3 items."]
    rt = Runtime(model=ScriptedModel(replies), ledger=ledger, tools=[lookup])
    session = "cli:bench-bundle"
    for i in range(TURNS):
        result = await rt.respond(IncomingMessage(
            "cli", f"Where is my order A-{i:05d}?", {"session_id": "bench-bundle"}),
            session_id=session)
        assert result.error is None, result.error
    return session


async def _bench(ledger: Any, work: Path) -> None:
    key = signing.write_keys(work / "k", work / "k.pub", "bench")
    settings = CheckpointSettings(str(work / "k"), str(work / "witness"))
    await checkpoints.make(ledger, key, settings)  # the old ledger's tree, once
    session = await _session(ledger)
    checkpoint, note = await checkpoints.make(ledger, key, settings)
    witnesses = [WitnessSigner.generate(f"w{i}.bench") for i in (1, 2, 3)]
    cosignatures_path(work / "witness", checkpoint.size).write_text(
        "".join(w.cosign(checkpoint.text(), 1_800_000_000) for w in witnesses))
    keys = [w.public for w in witnesses]
    with Timer() as t:
        held = bundle.cosignatures_of(checkpoint,
                                      read_cosignatures(work / "witness", checkpoint.size), keys)
        made = await bundle.make(ledger, bundle.SESSION, session, note, checkpoint, key.public,
                                 cosignatures=held)
        text = bundle.dump(made).encode()
    assert len(made["cosignatures"]) == 3
    row(f"bundle of a {TURNS}-turn session: made", f"{t.ms()}   (target < 2,000 ms)")
    with Timer() as t:
        summary = bundle.check(text, key.public, Quorum(tuple(keys), 2))
    assert summary.turns == TURNS and summary.quorum is not None
    row("checked (overt check-bundle)", f"{t.ms()}   (target < 1,000 ms)")
    spec = importlib.util.spec_from_file_location("overt_verify_bundle", VERIFIER)
    assert spec is not None and spec.loader is not None
    alone = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(alone)
    text_key = key.public.encode()
    with Timer() as t:
        alone.check(text, (*alone.parse_key(text_key), text_key),
                    ([k.encode() for k in keys], 2))
    row("checked (standalone verifier)", f"{t.ms()}   (both: 3 cosignatures, quorum 2)")
    entries = len(canonical_json(made["entries"]).encode())
    bodies = sum(len(b.encode()) for b in made["bodies"].values())
    row("size", f"{len(text):,} bytes: {len(made['entries']):,} entries ({entries:,} bytes), "
        f"{len(made['bodies']):,} bodies ({bodies:,} bytes), {len(made['nodes']):,} nodes")
    row("size / (bodies + entries)", f"{len(text) / (entries + bodies):.2f}   (target <= 1.5)")


def main() -> None:
    print(f"evidence bundles (issue 38): a {TURNS}-turn session, SQLite, {ENTRIES:,} entries "
          "behind it")
    cached = _cached_ledger()
    with tempfile.TemporaryDirectory(prefix="overt-bench-bundle-") as tmp:
        work = Path(tmp)
        shutil.copy(cached, work / "ledger.db")
        ledger = SqliteLedger.open(work / "ledger.db")
        try:
            asyncio.run(_bench(ledger, work))
        finally:
            ledger.close_sync()


if __name__ == "__main__":
    main()
