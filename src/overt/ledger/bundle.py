"""Evidence bundles: whole turns of the ledger in one file that anyone checks offline
(``overt export --bundle``, ``overt check-bundle``, and ``verifier/overt_verify_bundle.py``,
which imports nothing of overt).

A bundle (``"format": "overt-evidence-bundle/1"``, canonical JSON and a newline)
holds whole turns: every entry of each (the nine stored columns, ``data`` as its
canonical JSON text), one RFC 9162 inclusion path per entry into the signed
checkpoint (``paths[i]`` indexes ``nodes``, shared nodes written once), the signed
checkpoint note, the verifier key, the witness cosignatures of that checkpoint kept
beside it (each line with the witness key it names), the bodies the entries name
(or, withheld, only their digests), and per turn how many entries it has and where it completed. The
memory revisions its turns wrote are in it as their ``node.created`` /
``node.superseded`` entries, with the title and body under the entries'
``title_digest`` and ``body_digest``; each entry names the tool call that wrote it
(``tool_call_id``, whose ``tool_call.started`` is in the same turn), and the
summary lists them with it (links and retractions too).

docs/spec/evidence-bundle.md specifies the format and every check, in order;
:func:`check` makes them, and so does the standalone verifier, with the same verdict.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from overt.errors import LedgerIntegrityError, NotFoundError, UsageError
from overt.ledger.canonical import canonical_json, digest_text
from overt.ledger.chain import BODY_FIELDS, row_to_entry
from overt.ledger.checkpoints import Checkpoint, dialect
from overt.ledger.memory_check import Call, provenance_problem
from overt.ledger.proofs import (
    _check_entries,
    _entry_columns,
    _hash,
    _keys,
    _paths,
    _proving_tree,
    _whole_turn,
)
from overt.ledger.signing import DASH, PublicKey
from overt.witness.notes import WitnessKey, verify_cosignature
from overt.witness.quorum import Quorum
from overt.witness.quorum import check as check_quorum

FORMAT = "overt-evidence-bundle/1"
SESSION, TURN, RANGE = "session", "turn", "range"
BUNDLE_FIELDS: tuple[str, ...] = (*BODY_FIELDS, "title_digest", "body_digest")
"""The fields of an entry's data that name a body the bundle holds or withholds: the
content tier's, and a memory revision's title and body."""
MEMORY_KINDS = ("node.created", "node.superseded")
LINK_KINDS = ("link.created", "link.retracted")
TOP_KEYS = ("bodies", "checkpoint", "cosignatures", "entries", "format", "key", "nodes",
            "paths", "scope", "subject", "turns", "withheld")
TURN_KEYS = ("completed_seq", "turn_entries", "turn_id")
COSIGNATURE_KEYS = ("line", "witness")
_COLUMNS = "seq, id, kind, at, turn_id, session_id, data, prev_hash, hash"
_CHUNK = 500


def dump(bundle: dict[str, Any]) -> str:
    """The one written form of a bundle file."""
    return canonical_json(bundle) + "\n"


async def turns_in_scope(ledger: Any, scope: str, subject: str | None, since: str | None,
                         until: str | None) -> list[str]:
    """The turns a bundle of ``scope`` holds, by their first entry: the session's, the
    one turn, or every turn with an entry at ``[since, until)``.

    Raises:
        NotFoundError: there are none.
    """
    ph = dialect(ledger).ph
    if scope == SESSION:
        rows = await ledger.select(
            "SELECT turn_id, min(seq) FROM audit_log WHERE session_id = " + ph
            + " AND turn_id IS NOT NULL GROUP BY turn_id ORDER BY 2", (subject,))
    elif scope == TURN:
        rows = await ledger.select(
            f"SELECT turn_id, min(seq) FROM audit_log WHERE turn_id = {ph} GROUP BY turn_id",
            (subject,))
    else:
        rows = await ledger.select(
            f"SELECT turn_id, min(seq) FROM audit_log WHERE at >= {ph} AND at < {ph} "
            "AND turn_id IS NOT NULL GROUP BY turn_id ORDER BY 2",
            (since or "", until or "\uffff"))
    if not rows:
        what = {SESSION: f"session {subject!r}", TURN: f"turn {subject!r}"}.get(
            scope, f"the time range [{since or 'start'}, {until or 'now'})")
        raise NotFoundError(f"no turn in {what}")
    turns = [r[0] for r in rows]
    # a turn that began earlier than its first entry in the range: order by its real start
    first = {t: s for t, s in await _first_seqs(ledger, turns)}
    return sorted(turns, key=lambda t: first[t])


async def _first_seqs(ledger: Any, turns: Sequence[str]) -> list[tuple[str, int]]:
    ph = dialect(ledger).ph
    out: list[tuple[str, int]] = []
    for i in range(0, len(turns), _CHUNK):
        chunk = list(turns[i:i + _CHUNK])
        rows = await ledger.select(
            f"SELECT turn_id, min(seq) FROM audit_log WHERE turn_id IN "
            f"({', '.join([ph] * len(chunk))}) GROUP BY turn_id", chunk)
        out.extend((r[0], int(r[1])) for r in rows)
    return out


async def last_seq(ledger: Any, turns: Sequence[str]) -> int:
    """The seq of the last entry of ``turns``."""
    ph = dialect(ledger).ph
    last = 0
    for i in range(0, len(turns), _CHUNK):
        chunk = list(turns[i:i + _CHUNK])
        rows = await ledger.select(
            f"SELECT max(seq) FROM audit_log WHERE turn_id IN "
            f"({', '.join([ph] * len(chunk))})", chunk)
        if rows and rows[0][0] is not None:
            last = max(last, int(rows[0][0]))
    return last


async def turn_entries(ledger: Any, turns: Sequence[str]) -> list[Any]:
    """Every entry of ``turns``, in seq order."""
    ph = dialect(ledger).ph
    rows: list[Any] = []
    for i in range(0, len(turns), _CHUNK):
        chunk = list(turns[i:i + _CHUNK])
        rows.extend(await ledger.select(
            f"SELECT {_COLUMNS} FROM audit_log WHERE turn_id IN "
            f"({', '.join([ph] * len(chunk))})", chunk))
    return sorted((row_to_entry(r) for r in rows), key=lambda e: e.seq)


async def make(ledger: Any, scope: str, subject: str | None, note: str,
               checkpoint: Checkpoint, key: PublicKey, *, since: str | None = None,
               until: str | None = None, withhold: bool = False,
               cosignatures: Sequence[tuple[WitnessKey, str]] = (),
               found: list[str] | None = None) -> dict[str, Any]:
    """The bundle of the turns in ``scope`` (:func:`turns_in_scope`), proved under
    ``checkpoint`` (``note``, signed by ``key``). ``withhold``: the bodies' digests only.
    ``cosignatures``: (witness key, its cosignature line of ``checkpoint``) pairs, each
    checked here (:func:`cosignatures_of` picks them from what is kept).
    ``found`` gets what the ledger holds that it should not (a stored tile, a body or
    memory row that differs from its digest: withheld, never put in).

    Raises:
        NotFoundError: no turn in scope.
        UsageError: a turn has entries after the checkpoint (sign one first), or began
            in a pruned range (its first entries are gone).
        LedgerIntegrityError: the ledger's tree does not give the checkpoint's root.
    """
    if scope not in (SESSION, TURN, RANGE):
        raise UsageError(f"a bundle's scope is session, turn or range, not {scope!r}")
    turns = await turns_in_scope(ledger, scope, subject, since, until)
    entries = await turn_entries(ledger, turns)
    if entries[-1].seq > checkpoint.size:
        raise UsageError(f"the bundle's turns have entries after the newest checkpoint "
                         f"({checkpoint.size} entries): make one first (`overt ledger "
                         "checkpoint`)")
    by_turn: dict[str, list[Any]] = {t: [] for t in turns}
    for e in entries:
        by_turn[e.turn_id].append(e)
    records = []
    for turn in turns:
        mine = by_turn[turn]
        if mine[0].kind != "turn.started":
            raise UsageError(f"turn {turn} began before entry {mine[0].seq}, where the ledger "
                             "was pruned: its first entries are gone, so no bundle can show "
                             "the whole turn")
        ends = [e.seq for e in mine if e.kind == "turn.completed"]
        records.append({"turn_id": turn, "turn_entries": len(mine),
                        "completed_seq": ends[0] if ends else None})
    proving = await _proving_tree(ledger, checkpoint.size, [e.seq - 1 for e in entries],
                                  checkpoint.root, found)
    nodes, paths = _paths(proving, entries)
    bodies, withheld = await _bodies(ledger, entries, withhold, found)
    held: dict[str, dict[str, str]] = {}
    for k, line in cosignatures:
        verify_cosignature(checkpoint.text(), line, k)
        held[k.encode()] = {"line": line.rstrip("\n"), "witness": k.encode()}
    return {"format": FORMAT, "scope": scope, "subject": subject if scope != RANGE else None,
            "checkpoint": note, "key": key.encode(),
            "cosignatures": [held[k] for k in sorted(held)],
            "turns": records, "entries": [_entry_columns(e) for e in entries],
            "nodes": nodes, "paths": paths, "bodies": bodies, "withheld": sorted(withheld)}


def cosignatures_of(checkpoint: Checkpoint, lines: Sequence[str], keys: Sequence[WitnessKey],
                    notes: list[str] | None = None) -> list[tuple[WitnessKey, str]]:
    """The cosignature ``lines`` kept for ``checkpoint`` that one of ``keys`` (the
    configured witnesses') made and that verify, with that key; ``notes`` gets why
    each other line was left out."""
    picked: list[tuple[WitnessKey, str]] = []
    for line in lines:
        key = next((k for k in keys if _verifies(checkpoint.text(), line, k)), None)
        if key is not None:
            picked.append((key, line))
        elif notes is not None:
            notes.append(f"a cosignature no configured witness key verifies: {line[:60]!r}")
    return picked


def _verifies(body: str, line: str, key: WitnessKey) -> bool:
    try:
        verify_cosignature(body, line, key)
    except LedgerIntegrityError:
        return False
    return True


async def _bodies(ledger: Any, entries: Sequence[Any], withhold: bool,
                  found: list[str] | None) -> tuple[dict[str, str], set[str]]:
    named: dict[str, int] = {}
    memory: dict[str, tuple[str, str, str]] = {}  # node id -> (title digest, body digest)
    for e in entries:
        for name in BUNDLE_FIELDS:
            value = e.data.get(name)
            if isinstance(value, str):
                named.setdefault(value, e.seq)
        if e.kind in MEMORY_KINDS and isinstance(e.data.get("node_id"), str):
            memory[e.data["node_id"]] = (e.kind, e.data.get("title_digest"),
                                         e.data.get("body_digest"))
    if withhold:
        return {}, set(named)
    bodies: dict[str, str] = {}
    ids = list(memory)
    ph = dialect(ledger).ph
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i:i + _CHUNK]
        for node_id, title, body in await ledger.select(
                f"SELECT id, title, body FROM memory_nodes WHERE id IN "
                f"({', '.join([ph] * len(chunk))})", chunk):
            _, title_digest, body_digest = memory[node_id]
            for text, digest in ((title, title_digest), (body, body_digest)):
                if digest_text(text) == digest:
                    bodies[digest] = text
                elif found is not None:
                    found.append(f"memory revision {node_id}'s stored text does not match "
                                 f"its digest {digest}: withheld")
    for digest, seq in named.items():
        if digest in bodies:
            continue
        try:
            text = await ledger.content(digest, seq=seq)
        except LedgerIntegrityError as exc:
            text = None
            if found is not None:
                found.append(f"{exc}: withheld")
        if text is not None:
            bodies[digest] = text
    return bodies, set(named) - set(bodies)


# -- checking ---------------------------------------------------------------------


@dataclass
class Summary:
    """What a valid bundle shows (see :func:`summarise`)."""

    origin: str
    size: int
    time: str
    key_id: str
    scope: str
    subject: str | None
    turns: int
    entries: int
    completed: int
    sessions: list[str]
    first_at: str
    last_at: str
    actors: list[str]
    tools: dict[str, int]
    approvals: list[str]
    memory: list[str]
    input_tokens: int
    output_tokens: int
    cost_usd: float
    bodies: int
    withheld: int
    cosigners: list[str] = field(default_factory=list)
    """The witnesses whose cosignatures of the checkpoint the bundle holds (each checked
    against the key it names; trusted only as far as the checker's quorum says)."""
    quorum: str | None = None
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        what = (f"session {self.subject}" if self.scope == SESSION else
                f"turn {self.subject}" if self.scope == TURN else "a time range")
        tools = ", ".join(f"{k} x{n}" for k, n in self.tools.items()) or "none"
        lines = [
            f"ok: {self.turns} whole turns ({self.completed} completed), {self.entries} "
            f"entries, of {what}",
            f"  in {self.origin} as of {self.size} entries ({self.time}), signed by "
            f"{self.key_id}",
            f"  witnesses: cosigned by {', '.join(self.cosigners)}" if self.cosigners
            else "  witnesses: no cosignatures",
            *([f"             {self.quorum}"] if self.quorum else []),
            f"  when:      {self.first_at} .. {self.last_at}",
            f"  sessions:  {', '.join(self.sessions)}",
            f"  who:       {', '.join(self.actors) or 'not recorded'}",
            f"  tools:     {tools}",
            f"  approvals: {'; '.join(self.approvals) or 'none'}",
            f"  memory:    {self.memory[0] if self.memory else 'none written'}",
            *(f"             {line}" for line in self.memory[1:]),
            f"  cost:      {self.input_tokens} input + {self.output_tokens} output tokens, "
            f"${self.cost_usd:.6f}",
            f"  bodies:    {self.bodies} held and checked, {self.withheld} withheld "
            "(digests only)",
        ]
        return "\n".join(lines)


def _fail(message: str) -> LedgerIntegrityError:
    return LedgerIntegrityError(message)


def _checkpoint(note: Any, key: PublicKey) -> Checkpoint:
    if not isinstance(note, str):
        raise _fail("the checkpoint is a signed note (text)")
    _, sep, signatures = note.rpartition("\n\n")
    if not sep or signatures.count("\n") != 1 or not signatures.startswith(DASH + " "):
        raise _fail("the checkpoint note must carry exactly one signature, the log's "
                    "(witnesses' go in cosignatures)")
    return Checkpoint.open(note, key)


def check(text: bytes, key: PublicKey, quorum: Quorum | None = None) -> Summary:
    """Check a bundle file's bytes with the log's key, as the spec orders it; and, given
    a ``quorum`` of witness keys, that enough of them cosigned its checkpoint.

    Raises:
        LedgerIntegrityError: the first check that fails, named.
    """
    try:
        return _check(text, key, quorum)
    except RecursionError:
        raise _fail("not a bundle: nested too deeply") from None


def _cosigners(items: Any, body: str) -> list[WitnessKey]:
    """The witness keys of the bundle's cosignatures, each of which must verify under
    the key it names; listed by key, each once."""
    if not isinstance(items, list):
        raise _fail("cosignatures is a list")
    keys: list[WitnessKey] = []
    for item in items:
        _keys(item, COSIGNATURE_KEYS, "a cosignature")
        witness, line = item["witness"], item["line"]
        try:
            if not isinstance(witness, str) or not isinstance(line, str):
                raise UsageError("a cosignature's witness key and line are text")
            k = WitnessKey.parse(witness)
        except UsageError as exc:
            raise _fail(f"a cosignature's witness key: {exc}") from None
        if k.encode() != witness:
            raise _fail(f"the witness key {witness[:80]!r} is not in its one written form")
        verify_cosignature(body, line, k)  # LedgerIntegrityError: named
        keys.append(k)
    encoded = [k.encode() for k in keys]
    if encoded != sorted(set(encoded)):
        raise _fail("the cosignatures are listed by witness key, each key once")
    return keys


def _check(text: bytes, key: PublicKey, quorum: Quorum | None) -> Summary:
    try:
        decoded = text.decode("utf-8")
        bundle = json.loads(decoded)
        canonical = dump(bundle) if isinstance(bundle, dict) else None
    except (UnicodeDecodeError, ValueError, RecursionError, TypeError) as exc:
        raise _fail(f"not a bundle: {str(exc)[:200] or type(exc).__name__}") from None
    if canonical != decoded:
        raise _fail("not a bundle in its one written form (a canonical JSON object and a "
                    "newline)")
    _keys(bundle, TOP_KEYS, "a bundle")
    if bundle["format"] != FORMAT:
        raise _fail(f"unknown bundle format {str(bundle['format'])[:60]!r}")
    if bundle["key"] != key.encode():
        raise _fail(f"the bundle names key {str(bundle['key'])[:80]!r}, not {key.encode()}")
    cp = _checkpoint(bundle["checkpoint"], key)
    cosigners = _cosigners(bundle["cosignatures"], cp.text())
    entries, paths, raw_nodes = bundle["entries"], bundle["paths"], bundle["nodes"]
    if not isinstance(raw_nodes, list) or not isinstance(entries, list) or not entries \
            or not isinstance(paths, list) or len(paths) != len(entries):
        raise _fail("a bundle holds its entries (at least one), a list of nodes, and a path "
                    "for each entry")
    nodes = [_hash(n) for n in raw_nodes]
    if len(set(nodes)) != len(nodes):
        raise _fail("a node is listed twice")
    _check_entries(entries, paths, nodes, cp, "bundle")
    datas: list[dict[str, Any]] = []
    for columns in entries:
        if not isinstance(columns["turn_id"], str):
            raise _fail(f"entry {columns['seq']} is of no turn: a bundle holds whole turns")
        data = json.loads(columns["data"])
        if not isinstance(data, dict):
            raise _fail(f"entry {columns['seq']}'s data is not a JSON object")
        datas.append(data)
    turns = bundle["turns"]
    if not isinstance(turns, list) or not turns:
        raise _fail("a bundle lists its turns")
    held: dict[str, list[dict[str, Any]]] = {}
    for columns in entries:
        held.setdefault(columns["turn_id"], []).append(columns)
    if [_keys(t, TURN_KEYS, "a turn")["turn_id"] for t in turns] != list(held):
        raise _fail("the bundle's turns are not those of its entries, in the order of their "
                    "first entries")
    for record in turns:
        mine = held[record["turn_id"]]
        if mine[0]["kind"] != "turn.started":
            raise _fail(f"turn {record['turn_id']}'s first entry ({mine[0]['seq']}) is not its "
                        "turn.started: entries of the turn are missing")
        _whole_turn(record, mine, cp.size)
        _memory_writes(mine)
    scope, subject = bundle["scope"], bundle["subject"]
    if scope == SESSION:
        if not isinstance(subject, str) or any(c["session_id"] != subject for c in entries):
            raise _fail(f"an entry of the bundle is not of session {str(subject)[:80]!r}")
    elif scope == TURN:
        if len(turns) != 1 or turns[0]["turn_id"] != subject:
            raise _fail(f"a bundle of turn {str(subject)[:80]!r} holds that turn alone")
    elif scope != RANGE or subject is not None:
        raise _fail("the scope is session or turn (with its id) or range (with none)")
    bodies, withheld = bundle["bodies"], bundle["withheld"]
    if not isinstance(bodies, dict) or not isinstance(withheld, list) \
            or not all(isinstance(d, str) for d in withheld) or withheld != sorted(set(withheld)):
        raise _fail("bodies map digests to text; withheld is a sorted list of digests, "
                    "each once")
    named = {d[f] for d in datas for f in BUNDLE_FIELDS if isinstance(d.get(f), str)}
    if set(bodies) & set(withheld) or set(bodies) | set(withheld) != named:
        raise _fail("the bodies held and withheld are not exactly those the entries name")
    for digest in sorted(bodies):
        body = bodies[digest]
        if not isinstance(body, str) or digest_text(body) != digest:
            raise _fail(f"the body held under {digest[:80]} does not match its digest")
    summary = summarise(bundle, datas, cp, key)
    summary.cosigners = [k.label for k in cosigners]
    if quorum is not None:
        counted = check_quorum(cp.text(), [c["line"] for c in bundle["cosignatures"]], quorum)
        if not counted.ok:
            raise _fail("the witness quorum is not met: " + counted.problem())
        summary.quorum = (f"quorum {quorum.needed} of {len(set(quorum.keys))} keys: met "
                          f"({', '.join(counted.cosigned)})")
    return summary


def _memory_writes(entries: list[dict[str, Any]]) -> None:
    """That each memory write of a whole turn names the tool call of the turn that made
    it, running when it was written (:func:`.memory_check.provenance_problem`, as
    ``verify`` asks of the ledger); one from before provenance was recorded names no
    call and no origin."""
    datas = [json.loads(c["data"]) for c in entries]
    calls: list[Call] = [(c["seq"], c["kind"], c["turn_id"], c["session_id"],
                          d.get("tool_call_id")) for c, d in zip(entries, datas, strict=True)
                         if c["kind"] in ("tool_call.started", "tool_call.completed",
                                          "turn.started", "turn.completed")]
    for c, d in zip(entries, datas, strict=True):
        if c["kind"] in MEMORY_KINDS or c["kind"] in LINK_KINDS:
            problem = provenance_problem(c["seq"], c["turn_id"], c["session_id"], d, calls,
                                         False)
            if problem is not None:
                raise _fail(f"entry {c['seq']} ({c['kind']}) {problem}: the log holds a "
                            "memory write the ledger should have refused")


def summarise(bundle: dict[str, Any], datas: list[dict[str, Any]], cp: Checkpoint,
              key: PublicKey) -> Summary:
    """Who, when, which tools, approvals and memory, the cost: of a checked bundle."""
    entries = bundle["entries"]
    actors: list[str] = []
    tools: Counter[str] = Counter()
    approvals: dict[str, list[str]] = {}
    memory: list[str] = []
    tokens_in = tokens_out = 0
    cost = 0.0
    calls = {(c["turn_id"], json.dumps(d.get("tool_call_id"))): d.get("tool_name")
             for c, d in zip(entries, datas, strict=True) if c["kind"] == "tool_call.started"}
    for columns, data in zip(entries, datas, strict=True):
        kind = columns["kind"]
        for name in ("actor", "decided_by"):
            who = data.get(name)
            if isinstance(who, str) and who and who not in actors:
                actors.append(who)
        if kind == "tool_call.completed":
            tools[f"{data.get('tool_name')} {data.get('tool_status')}"] += 1
        elif kind == "approval.requested":
            approvals[str(data.get("request_id"))] = [
                f"{data.get('tool_name')} ({data.get('mode')}, asked for {data.get('actor')})"]
        elif kind == "approval.decided":
            approvals.setdefault(str(data.get("request_id")), [str(data.get("tool_name"))]) \
                .append(f"{data.get('decision')} by {data.get('decided_by')}")
        elif kind == "inference":
            tokens_in += int(data.get("input_tokens") or 0)
            tokens_out += int(data.get("output_tokens") or 0)
            cost += float(data.get("cost_usd") or 0)
        elif kind in MEMORY_KINDS or kind in LINK_KINDS:
            memory.append(_memory_line(kind, data, columns["turn_id"], calls))
    sessions = sorted({str(c["session_id"]) for c in entries})
    return Summary(
        cp.origin, cp.size, cp.time, key.key_id, bundle["scope"], bundle["subject"],
        len(bundle["turns"]), len(entries),
        sum(1 for t in bundle["turns"] if t["completed_seq"] is not None), sessions,
        entries[0]["at"], max(c["at"] for c in entries), actors, dict(sorted(tools.items())),
        [f"{r}: {', '.join(v)}" for r, v in approvals.items()], memory, tokens_in,
        tokens_out, round(cost, 10), len(bundle["bodies"]), len(bundle["withheld"]))


def _memory_line(kind: str, data: dict[str, Any], turn_id: str,
                 calls: dict[tuple[str, str], Any]) -> str:
    """A memory write of a checked bundle: what, by whom, through which tool call of
    its turn (the call's tool from its ``tool_call.started``; :func:`_memory_writes`
    checked the claim)."""
    if kind in MEMORY_KINDS:
        what = (f"{data.get('node_kind')} {data.get('node_id')} revision "
                f"{data.get('revision', 1)}")
    elif kind == "link.created":
        what = (f"link {data.get('link_kind')} {data.get('from_id')} -> {data.get('to_id')} "
                f"({data.get('link_id')})")
    else:
        what = f"link {data.get('link_kind')} {data.get('link_id')} retracted"
    call = data.get("tool_call_id")
    if call is None:
        how = f"through the {data.get('origin') or 'unrecorded origin'}"
    else:
        how = f"in tool call {call} ({calls.get((turn_id, json.dumps(call)))})"
    return f"{what} by {data.get('actor')}, {how}"


__all__ = ["FORMAT", "Summary", "check", "dump", "make"]
