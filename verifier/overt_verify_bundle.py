#!/usr/bin/env python3
"""Check an overt evidence bundle offline, trusting nothing of overt.

    python3 overt_verify_bundle.py BUNDLE.json --key LOG.pub

Needs Python 3.10+ and the ``cryptography`` package (for Ed25519); nothing else,
and no overt import. It makes the checks of docs/spec/evidence-bundle.md in the
order that page lists them, and stops at the first that fails.

Exit status: 0 the bundle is valid (a summary follows), 3 it is not (the first
failure is named), 2 the key file or the bundle file cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys

FORMAT = "overt-evidence-bundle/1"
DASH = "\u2014"
ORIGIN_PREFIX = "overt/ledger/"
TOP_KEYS = ["bodies", "checkpoint", "cosignatures", "entries", "format", "key", "nodes",
            "paths", "scope", "subject", "turns", "withheld"]
ENTRY_KEYS = ["at", "data", "hash", "id", "kind", "prev_hash", "seq", "session_id", "turn_id"]
TURN_KEYS = ["completed_seq", "turn_entries", "turn_id"]
BODY_FIELDS = ["message_digest", "response_digest", "args_sha256", "result_digest",
               "reply_digest", "reason_digest", "checkpoint_digest", "content_digest",
               "context_digest", "before_digest", "after_digest", "error_digest",
               "request_digest", "policy_digest", "title_digest", "body_digest"]


class Invalid(Exception):
    """The bundle does not verify; the message says why."""


def canonical(value):
    """The canonical JSON text: sorted keys, no spaces, non-ASCII as itself."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def sha256_tag(text):
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def exact(obj, keys, what):
    if not isinstance(obj, dict) or sorted(obj) != keys:
        raise Invalid(f"{what} must hold exactly {', '.join(keys)}")
    return obj


def b64_exact(text, size, what):
    """Base64 that decodes to ``size`` bytes and is written the one way it can be."""
    try:
        raw = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size or base64.b64encode(raw).decode() != text:
        raise Invalid(f"{what} is not base64 of {size} bytes: {str(text)[:60]!r}")
    return raw


# -- keys and the signed checkpoint (C2SP signed-note, tlog-checkpoint) -----------------

def parse_key(text):
    """A verifier key ``NAME+HASH+BASE64(0x01 || Ed25519 public key)``: (name, hash, key)."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3 or not parts[0] or any(c.isspace() for c in parts[0]):
        raise ValueError("not a verifier key (NAME+HASH+BASE64)")
    name, hash_hex, encoded = parts
    raw = base64.b64decode(encoded, validate=True)
    if len(raw) != 33 or raw[0] != 1:
        raise ValueError("not an Ed25519 verifier key")
    key_hash = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    if key_hash.hex() != hash_hex:
        raise ValueError("the key's hash does not match its name and key")
    return name, key_hash, raw[1:]


def open_checkpoint(note, key):
    """The checkpoint the note holds, if it carries exactly one signature line and that
    is ``key``'s and verifies: (origin, size, root, time)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    name, key_hash, public = key
    if not isinstance(note, str):
        raise Invalid("the checkpoint is a signed note (text)")
    text, sep, signature = note.rpartition("\n\n")
    if not sep or signature.count("\n") != 1 or not signature.endswith("\n"):
        raise Invalid("the checkpoint note must carry exactly one signature, the log's")
    parts = signature[:-1].split(" ")
    if len(parts) != 3 or parts[0] != DASH:
        raise Invalid(f"not a signature line: {signature[:80]!r}")
    if parts[1] != name:
        raise Invalid(f"the checkpoint is not signed by {name}")
    try:
        raw = base64.b64decode(parts[2], validate=True)
    except (binascii.Error, ValueError):
        raise Invalid("the signature is not base64") from None
    if base64.b64encode(raw).decode() != parts[2]:
        raise Invalid("the signature is not in canonical base64")
    if raw[:4] != key_hash:
        raise Invalid(f"the checkpoint is not signed by {name}")
    text += "\n"
    try:
        if len(raw) != 68:
            raise InvalidSignature()
        Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], text.encode("utf-8"))
    except InvalidSignature:
        raise Invalid("the checkpoint's signature does not verify") from None
    # the body, in its one written form: origin, size, root, head, time, pruned
    lines = text.split("\n")
    if len(lines) != 7 or lines[6] != "" or not lines[0].startswith(ORIGIN_PREFIX):
        raise Invalid("not an overt checkpoint")
    fields = [line.split(" ", 1) for line in lines[3:6]]
    if [f[0] for f in fields] != ["head", "time", "pruned"] or any(len(f) != 2 for f in fields):
        raise Invalid("not an overt checkpoint: not head, time, pruned")
    size, root = lines[1], b64_exact(lines[2], 32, "the checkpoint's root")
    head, time, pruned = fields[0][1], fields[1][1], fields[2][1]
    if not (size.isdigit() and size.isascii() and str(int(size)) == size and int(size) >= 1
            and pruned.isdigit() and pruned.isascii() and str(int(pruned)) == pruned
            and int(pruned) <= int(size) + 1
            and head.startswith("sha256:") and len(head) == 71
            and all(c in "0123456789abcdef" for c in head[7:])
            and time and " " not in time):
        raise Invalid("not an overt checkpoint in its one written form")
    return lines[0], int(size), root, time


# -- the chain hash and the Merkle tree (RFC 9162) -------------------------------------

def entry_hash(e):
    """The chain hash recomputed from an entry's columns."""
    data = e["data"]
    try:
        if not isinstance(data, str) or canonical(json.loads(data)) != data:
            raise ValueError
    except (ValueError, RecursionError):
        raise Invalid(f"entry {e['seq']}'s data is not canonical JSON text") from None
    if not all(isinstance(e[k], str) for k in ("id", "kind", "at", "prev_hash", "hash")) or \
            not all(v is None or isinstance(v, str) for v in (e["turn_id"], e["session_id"])):
        raise Invalid(f"entry {e['seq']} has a column of the wrong type")
    q = lambda v: "null" if v is None else json.dumps(v, ensure_ascii=False)  # noqa: E731
    payload = ('{"at":' + q(e["at"]) + ',"data":' + data + ',"id":' + q(e["id"])
               + ',"kind":' + q(e["kind"]) + ',"seq":' + str(e["seq"])
               + ',"session_id":' + q(e["session_id"]) + ',"turn_id":' + q(e["turn_id"]) + "}")
    return sha256_tag(e["prev_hash"] + "\n" + payload)


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(leaf, index, size, path, root):
    """RFC 9162 section 2.1.3.2."""
    if index >= size or index < 0:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


# -- the bundle ------------------------------------------------------------------------

def check(text, key):
    """Check the bundle's bytes; return (bundle, decoded data of each entry, checkpoint)."""
    try:
        decoded = text.decode("utf-8")
        bundle = json.loads(decoded)
        if not isinstance(bundle, dict) or canonical(bundle) + "\n" != decoded:
            raise Invalid("not a bundle in its one written form (a canonical JSON object "
                          "and a newline)")
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Invalid(f"not a bundle: {str(exc)[:200] or type(exc).__name__}") from None
    exact(bundle, TOP_KEYS, "a bundle")
    if bundle["format"] != FORMAT:
        raise Invalid(f"unknown bundle format {str(bundle['format'])[:60]!r}")
    if bundle["key"] != key[3]:
        raise Invalid(f"the bundle names key {str(bundle['key'])[:80]!r}, not {key[3]}")
    if bundle["cosignatures"] != []:
        raise Invalid("the bundle holds witness cosignatures, which this version does "
                      "not check")
    origin, size, root, time = open_checkpoint(bundle["checkpoint"], key[:3])
    entries, paths, nodes = bundle["entries"], bundle["paths"], bundle["nodes"]
    if not isinstance(nodes, list) or not isinstance(entries, list) or not entries \
            or not isinstance(paths, list) or len(paths) != len(entries):
        raise Invalid("a bundle holds its entries (at least one), a list of nodes, and a "
                      "path for each entry")
    nodes = [b64_exact(n, 32, "a node") for n in nodes]
    if len(set(nodes)) != len(nodes):
        raise Invalid("a node is listed twice")
    used, previous, datas = set(), None, []
    for e, path in zip(entries, paths, strict=True):
        exact(e, ENTRY_KEYS, "an entry")
        seq = e["seq"]
        if not is_int(seq) or not 0 < seq <= size:
            raise Invalid(f"entry seq {str(seq)[:40]!r} is not in the tree of {size}")
        if previous is not None and seq <= previous["seq"]:
            raise Invalid(f"entry {seq} is not after entry {previous['seq']}")
        if previous is not None and seq == previous["seq"] + 1 \
                and e["prev_hash"] != previous["hash"]:
            raise Invalid(f"entry {seq}'s prev_hash is not entry {previous['seq']}'s hash")
        if not isinstance(e["turn_id"], str):
            raise Invalid(f"entry {seq} is of no turn: a bundle holds whole turns")
        computed = entry_hash(e)
        if computed != e["hash"]:
            raise Invalid(f"entry {seq}'s columns do not give its hash")
        data = json.loads(e["data"])
        if not isinstance(data, dict):
            raise Invalid(f"entry {seq}'s data is not a JSON object")
        if not isinstance(path, list) or not all(is_int(i) and 0 <= i < len(nodes)
                                                 for i in path):
            raise Invalid(f"entry {seq}'s path is not a list of node indexes")
        used.update(path)
        leaf = hashlib.sha256(b"\x00" + computed.encode("ascii")).digest()
        if not verify_inclusion(leaf, seq - 1, size, [nodes[i] for i in path], root):
            raise Invalid(f"entry {seq} is not in the tree the checkpoint signed")
        datas.append(data)
        previous = e
    if len(used) != len(nodes):
        raise Invalid("the bundle lists nodes no path uses")
    turns = bundle["turns"]
    if not isinstance(turns, list) or not turns:
        raise Invalid("a bundle lists its turns")
    held = {}
    for e, data in zip(entries, datas, strict=True):
        held.setdefault(e["turn_id"], []).append((e, data))
    if [exact(t, TURN_KEYS, "a turn")["turn_id"] for t in turns] != list(held):
        raise Invalid("the bundle's turns are not those of its entries, in the order of "
                      "their first entries")
    for turn in turns:
        whole_turn(turn, held[turn["turn_id"]])
    scope, subject = bundle["scope"], bundle["subject"]
    if scope == "session":
        if not isinstance(subject, str) or any(e["session_id"] != subject for e in entries):
            raise Invalid(f"an entry of the bundle is not of session {str(subject)[:80]!r}")
    elif scope == "turn":
        if len(turns) != 1 or turns[0]["turn_id"] != subject:
            raise Invalid(f"a bundle of turn {str(subject)[:80]!r} holds that turn alone")
    elif scope != "range" or subject is not None:
        raise Invalid("the scope is session or turn (with its id) or range (with none)")
    bodies, withheld = bundle["bodies"], bundle["withheld"]
    if not isinstance(bodies, dict) or not isinstance(withheld, list) \
            or not all(isinstance(d, str) for d in withheld) or withheld != sorted(set(withheld)):
        raise Invalid("bodies map digests to text; withheld is a sorted list of digests, "
                      "each once")
    named = {d[f] for d in datas for f in BODY_FIELDS if isinstance(d.get(f), str)}
    if set(bodies) & set(withheld) or set(bodies) | set(withheld) != named:
        raise Invalid("the bodies held and withheld are not exactly those the entries name")
    for digest in sorted(bodies):
        if not isinstance(bodies[digest], str) or sha256_tag(bodies[digest]) != digest:
            raise Invalid(f"the body held under {digest[:80]} does not match its digest")
    return bundle, datas, (origin, size, time)


def whole_turn(turn, held):
    """That the turn's entries are all there: it starts with turn.started, holds as many
    entries as it says, its turn.completed where it says, and what that counts."""
    entries = [e for e, _ in held]
    kinds = [e["kind"] for e in entries]
    if kinds[0] != "turn.started":
        raise Invalid(f"turn {turn['turn_id']}'s first entry ({entries[0]['seq']}) is not "
                      "its turn.started: entries of the turn are missing")
    count, completed = turn["turn_entries"], turn["completed_seq"]
    if not is_int(count) or count != len(entries):
        raise Invalid(f"the bundle says turn {turn['turn_id']} has {count!r} entries, but "
                      f"holds {len(entries)}: entries of the turn are missing")
    ends = [(e, d) for e, d in held if e["kind"] == "turn.completed"]
    if completed is None:
        if ends:
            raise Invalid("the bundle says the turn is in progress, but holds its "
                          f"turn.completed (entry {ends[0][0]['seq']})")
        return
    if not is_int(completed) or [e["seq"] for e, _ in ends] != [completed]:
        raise Invalid(f"the bundle says the turn completed at entry {completed!r}, but does "
                      "not hold that turn.completed entry: entries of the turn are missing")
    done = ends[0][1]
    for kind, name in (("tool_call.completed", "tool_calls"), ("inference", "model_calls")):
        said = done.get(name)
        if isinstance(said, int) and kinds.count(kind) < said:
            raise Invalid(f"turn.completed (entry {completed}) counts {said} {name}, but the "
                          f"bundle holds {kinds.count(kind)} {kind} entries")
    started = {d.get("tool_call_id") for e, d in held if e["kind"] == "tool_call.started"}
    for e, d in held:
        if e["kind"] == "tool_call.completed" and d.get("tool_status") == "ok" \
                and not d.get("provided_by") and d.get("tool_call_id") not in started:
            raise Invalid(f"tool call {d.get('tool_call_id')!r} ran (entry {e['seq']}), but "
                          "the bundle holds no tool_call.started for it")


def summary(bundle, datas, checkpoint):
    """Who, when, which tools, which approvals, the cost."""
    entries = bundle["entries"]
    actors, tools, approvals = [], {}, {}
    tokens_in = tokens_out = 0
    cost = 0.0
    for e, d in zip(entries, datas, strict=True):
        for name in ("actor", "decided_by"):
            if isinstance(d.get(name), str) and d[name] and d[name] not in actors:
                actors.append(d[name])
        if e["kind"] == "tool_call.completed":
            tool = f"{d.get('tool_name')} {d.get('tool_status')}"
            tools[tool] = tools.get(tool, 0) + 1
        elif e["kind"] == "approval.requested":
            approvals[d.get("request_id")] = f"{d.get('tool_name')} asked"
        elif e["kind"] == "approval.decided":
            approvals[d.get("request_id")] = (f"{d.get('tool_name')} {d.get('decision')} by "
                                              f"{d.get('decided_by')}")
        elif e["kind"] == "inference":
            tokens_in += int(d.get("input_tokens") or 0)
            tokens_out += int(d.get("output_tokens") or 0)
            cost += float(d.get("cost_usd") or 0)
    origin, size, time = checkpoint
    done = sum(1 for t in bundle["turns"] if t["completed_seq"] is not None)
    return "\n".join([
        f"valid: {len(bundle['turns'])} whole turns ({done} completed), {len(entries)} "
        f"entries, scope {bundle['scope']} {bundle['subject'] or ''}".rstrip(),
        f"  proved in {origin} as of {size} entries ({time})",
        f"  when:      {entries[0]['at']} .. {max(e['at'] for e in entries)}",
        f"  who:       {', '.join(actors) or 'not recorded'}",
        "  tools:     " + (", ".join(f"{k} x{n}" for k, n in sorted(tools.items())) or "none"),
        "  approvals: " + ("; ".join(f"{r}: {v}" for r, v in approvals.items()) or "none"),
        f"  cost:      {tokens_in} input + {tokens_out} output tokens, ${cost:.6f}",
        f"  bodies:    {len(bundle['bodies'])} checked, {len(bundle['withheld'])} withheld",
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1].strip())
    parser.add_argument("bundle", help="the bundle file")
    parser.add_argument("--key", required=True, help="the log's verifier key file")
    args = parser.parse_args(argv)
    try:
        with open(args.key, encoding="ascii") as f:
            key_text = f.read().strip()
        key = (*parse_key(key_text), key_text)
        with open(args.bundle, "rb") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError, ValueError, binascii.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        print(summary(*check(text, key)))
    except Invalid as exc:
        print(f"INVALID: {exc}")
        return 3
    except RecursionError:
        print("INVALID: nested too deeply")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
