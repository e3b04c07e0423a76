#!/usr/bin/env python3
"""Check an overt evidence bundle offline, trusting nothing of overt.

    python3 overt_verify_bundle.py BUNDLE --key LOG.pub [--witness-key VKEY]... [--quorum N]

Needs Python 3.10+ and the ``cryptography`` package (for Ed25519); nothing else, and
no overt import. It makes the checks of docs/spec/evidence-bundle.md in that page's
order, and stops at the first that fails. Exit status: 0 the bundle is valid (a
summary follows), 3 it is not (the first failure named), 2 a key or file unreadable.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
from pathlib import Path

FORMAT = "overt-evidence-bundle/1"
DASH = "\u2014"
CHECKPOINT = re.compile("(overt/ledger/[^\n]*)\n([1-9][0-9]*)\n([^\n]*)\nhead sha256:"
                        "[0-9a-f]{64}\ntime ([^ \n]+)\npruned (0|[1-9][0-9]*)\n")
TOP_KEYS = ["bodies", "checkpoint", "cosignatures", "entries", "format", "key", "nodes",
            "paths", "scope", "subject", "turns", "withheld"]
ENTRY_KEYS = ["at", "data", "hash", "id", "kind", "prev_hash", "seq", "session_id", "turn_id"]
TURN_KEYS = ["completed_seq", "turn_entries", "turn_id"]
MEMORY_KINDS = ["node.created", "node.superseded", "link.created", "link.retracted"]
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


def parse_key(text, alg=1):
    """A verifier key ``NAME+HASH+BASE64(alg || Ed25519 public key)``: (name, hash, key).
    ``alg`` 1: a log's key (C2SP signed-note); 4: a witness's (tlog-cosignature)."""
    parts = text.split("+", 2)
    if len(parts) != 3 or not parts[0].isprintable() or any(c.isspace() for c in parts[0]):
        raise ValueError("not a verifier key (NAME+HASH+BASE64)")
    name, hash_hex, encoded = parts
    raw = base64.b64decode(encoded, validate=True)
    if len(raw) != 33 or raw[0] != alg or base64.b64encode(raw).decode() != encoded:
        raise ValueError(f"not an Ed25519 verifier key of type {alg}")
    key_hash = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    if key_hash.hex() != hash_hex:
        raise ValueError("the key's hash does not match its name and key")
    return name, key_hash, raw[1:]


def ed25519_ok(public, signature, message):
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    try:
        return Ed25519PublicKey.from_public_bytes(public).verify(signature, message) is None
    except InvalidSignature:
        return False


def signature_line(line, name, key_hash, size, what):
    """The ``size`` bytes of a line ``— NAME BASE64`` by the key (name, key_hash)."""
    parts = line.split(" ") if isinstance(line, str) else []
    if len(parts) != 3 or parts[0] != DASH or parts[1] != name:
        raise Invalid(f"{what} is not a signature line of {name}")
    raw = b64_exact(parts[2], size, what)
    if raw[:4] != key_hash:
        raise Invalid(f"{what} is not by {name}")
    return raw


def open_checkpoint(note, key):
    """The checkpoint the note holds, if it carries exactly one signature line and that
    is ``key``'s and verifies: (origin, size, root, time, body)."""
    name, key_hash, public = key
    if not isinstance(note, str):
        raise Invalid("the checkpoint is a signed note (text)")
    text, sep, signature = note.rpartition("\n\n")
    if not sep or signature.count("\n") != 1 or not signature.endswith("\n"):
        raise Invalid("the checkpoint note must carry exactly one signature, the log's")
    raw = signature_line(signature[:-1], name, key_hash, 68, "the checkpoint's signature")
    text += "\n"
    if not ed25519_ok(public, raw[4:], text.encode("utf-8")):
        raise Invalid("the checkpoint's signature does not verify")
    body = CHECKPOINT.fullmatch(text)  # origin, size, root, head, time, pruned
    if body is None or int(body[5]) > int(body[2]) + 1:
        raise Invalid("not an overt checkpoint in its one written form")
    return body[1], int(body[2]), b64_exact(body[3], 32, "the root"), body[4], text


def cosigners(items, body):
    """The witness keys of the cosignatures (C2SP tlog-cosignature, cosignature/v1), each
    of which must verify under the key it names; listed by key, each once."""
    if not isinstance(items, list):
        raise Invalid("cosignatures is a list")
    keys = []
    for item in items:
        exact(item, ["line", "witness"], "a cosignature")
        witness, line = item["witness"], item["line"]
        try:
            name, key_id, public = parse_key(witness, alg=4)
        except (ValueError, binascii.Error, AttributeError):
            raise Invalid(f"not a witness key: {str(witness)[:80]!r}") from None
        raw = signature_line(line, name, key_id, 76, "a cosignature")
        stamp = int.from_bytes(raw[4:12], "big")
        signed = f"cosignature/v1\ntime {stamp}\n{body}".encode("utf-8")
        if stamp >= 2**63 or not ed25519_ok(public, raw[12:], signed):
            raise Invalid(f"the cosignature of {name}+{key_id.hex()} does not verify")
        keys.append(witness)
    if keys != sorted(set(keys)):
        raise Invalid("the cosignatures are listed by witness key, each key once")
    return keys


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
    return "sha256:" + hashlib.sha256((e["prev_hash"] + "\n" + payload).encode()).hexdigest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(leaf, index, size, path, root):
    """RFC 9162 section 2.1.3.2 (0 <= index < size)."""
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


def check(text, key, quorum=None):
    """Check the bundle's bytes, and given ``quorum`` ((witness keys, N)), that N of those
    keys cosigned; return (bundle, decoded data of each entry, checkpoint)."""
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
    origin, size, root, time, body = open_checkpoint(bundle["checkpoint"], key[:3])
    cosigned = cosigners(bundle["cosignatures"], body)
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
        if type(seq) is not int or not 0 < seq <= size:
            raise Invalid(f"entry seq {str(seq)[:40]!r} is not in the tree of {size}")
        if previous is not None and (seq <= previous["seq"] or seq == previous["seq"] + 1
                                     and e["prev_hash"] != previous["hash"]):
            raise Invalid(f"entry {seq} does not follow entry {previous['seq']} (its seq or "
                          "its prev_hash)")
        if not isinstance(e["turn_id"], str):
            raise Invalid(f"entry {seq} is of no turn: a bundle holds whole turns")
        computed = entry_hash(e)
        if computed != e["hash"]:
            raise Invalid(f"entry {seq}'s columns do not give its hash")
        data = json.loads(e["data"])
        if not isinstance(data, dict):
            raise Invalid(f"entry {seq}'s data is not a JSON object")
        if not isinstance(path, list) or not all(type(i) is int and 0 <= i < len(nodes)
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
    if not (scope == "session" and isinstance(subject, str)
            and all(e["session_id"] == subject for e in entries)
            or scope == "turn" and len(turns) == 1 and turns[0]["turn_id"] == subject
            or scope == "range" and subject is None):
        raise Invalid(f"the entries are not those of scope {str(scope)[:20]!r} "
                      f"{str(subject)[:80]!r}")
    bodies, withheld = bundle["bodies"], bundle["withheld"]
    if not isinstance(bodies, dict) or not isinstance(withheld, list) \
            or not all(isinstance(d, str) for d in withheld) or withheld != sorted(set(withheld)):
        raise Invalid("bodies map digests to text; withheld is a sorted list of digests, "
                      "each once")
    named = {d[f] for d in datas for f in BODY_FIELDS if isinstance(d.get(f), str)}
    if set(bodies) & set(withheld) or set(bodies) | set(withheld) != named:
        raise Invalid("the bodies held and withheld are not exactly those the entries name")
    for digest in sorted(bodies):
        if not isinstance(bodies[digest], str) \
                or "sha256:" + hashlib.sha256(bodies[digest].encode()).hexdigest() != digest:
            raise Invalid(f"the body held under {digest[:80]} does not match its digest")
    keys, needed = quorum or ([], 0)
    have = [k for k in keys if k in cosigned]
    if len(have) < needed:
        missing = ", ".join(k.rsplit("+", 1)[0] for k in keys if k not in cosigned)
        raise Invalid(f"the witness quorum is not met: {len(have)} of the {needed} "
                      f"cosignatures the quorum needs (missing: {missing})")
    met = f"quorum {needed} of {len(keys)} keys: met" if quorum else None
    return bundle, datas, (origin, size, time, cosigned, met)


def whole_turn(turn, held):
    """That the turn's entries are all there: it starts with turn.started, holds as many
    entries as it says, its turn.completed where it says, and what that counts."""
    kinds = [e["kind"] for e, _ in held]
    if kinds[0] != "turn.started":
        raise Invalid(f"turn {turn['turn_id']}'s first entry ({held[0][0]['seq']}) is not "
                      "its turn.started: entries of the turn are missing")
    count, completed = turn["turn_entries"], turn["completed_seq"]
    if type(count) is not int or count != len(held):
        raise Invalid(f"the bundle says turn {turn['turn_id']} has {count!r} entries, but "
                      f"holds {len(held)}: entries of the turn are missing")
    memory_writes(held)
    ends = [(e, d) for e, d in held if e["kind"] == "turn.completed"]
    if completed is None:
        if ends:
            raise Invalid("the bundle says the turn is in progress, but holds its "
                          f"turn.completed (entry {ends[0][0]['seq']})")
        return
    if type(completed) is not int or [e["seq"] for e, _ in ends] != [completed]:
        raise Invalid(f"the bundle says the turn completed at entry {completed!r}, but does "
                      "not hold that turn.completed entry: entries of the turn are missing")
    done = ends[0][1]
    for kind, name in (("tool_call.completed", "tool_calls"), ("inference", "model_calls")):
        said = done.get(name)
        if isinstance(said, int) and kinds.count(kind) < said:
            raise Invalid(f"turn.completed (entry {completed}) counts {said} {name}, but the "
                          f"bundle holds {kinds.count(kind)} {kind} entries")
    started = {canonical(d.get("tool_call_id")) for e, d in held
               if e["kind"] == "tool_call.started"}
    for e, d in held:
        if e["kind"] == "tool_call.completed" and d.get("tool_status") == "ok" \
                and not d.get("provided_by") and canonical(d.get("tool_call_id")) not in started:
            raise Invalid(f"tool call {d.get('tool_call_id')!r} ran (entry {e['seq']}), but "
                          "the bundle holds no tool_call.started for it")


def memory_writes(held):
    """Each memory write names the tool call of its turn that made it, then running in its
    session (one from before provenance was recorded names no call and no origin)."""
    running = {}  # tool call id -> the session of its tool_call.started
    for e, d in held:
        kind, call, origin = e["kind"], d.get("tool_call_id"), d.get("origin")
        if kind in ("tool_call.started", "tool_call.completed") and isinstance(call, str):
            running[call] = (e["session_id"] or "") if kind == "tool_call.started" else None
        elif kind == "turn.completed":
            running = {}
        elif kind in MEMORY_KINDS and (call, origin) != (None, None) and (
                origin not in (None, "tool") or not isinstance(call, str)
                or running.get(call) != (e["session_id"] or "")):
            raise Invalid(f"entry {e['seq']} writes memory as tool call {str(call)[:80]!r}, "
                          "which its turn does not show running then")


def summary(bundle, datas, checkpoint):
    """Who, when, which tools, which approvals, the cost."""
    pairs, tools, approvals = list(zip(bundle["entries"], datas)), {}, {}
    actors = list(dict.fromkeys(d[n] for _, d in pairs for n in ("actor", "decided_by")
                                if isinstance(d.get(n), str) and d[n]))
    for e, d in pairs:
        if e["kind"] == "tool_call.completed":
            tool = f"{d.get('tool_name')} {d.get('tool_status')}"
            tools[tool] = tools.get(tool, 0) + 1
        elif e["kind"] in ("approval.requested", "approval.decided"):
            approvals[d.get("request_id")] = f"{d.get('tool_name')} " + (
                "asked" if e["kind"] == "approval.requested"
                else f"{d.get('decision')} by {d.get('decided_by')}")
    calls = [d for e, d in pairs if e["kind"] == "inference"]
    tokens = [sum(int(d.get(k) or 0) for d in calls) for k in ("input_tokens", "output_tokens")]
    cost = sum(float(d.get("cost_usd") or 0) for d in calls)
    origin, size, time, cosigned, met = checkpoint
    done = sum(1 for t in bundle["turns"] if t["completed_seq"] is not None)
    return "\n".join([
        f"valid: {len(bundle['turns'])} whole turns ({done} completed), {len(pairs)} "
        f"entries, scope {bundle['scope']} {bundle['subject'] or ''}".rstrip(),
        f"  proved in {origin} as of {size} entries ({time})",
        "  witnesses: " + (f"cosigned by {', '.join(k.rsplit('+', 1)[0] for k in cosigned)}"
                           if cosigned else "no cosignatures") + (f"; {met}" if met else ""),
        f"  when:      {pairs[0][0]['at']} .. {max(e['at'] for e, _ in pairs)}",
        f"  who:       {', '.join(actors) or 'not recorded'}",
        "  tools:     " + (", ".join(f"{k} x{n}" for k, n in sorted(tools.items())) or "none"),
        "  approvals: " + ("; ".join(f"{r}: {v}" for r, v in approvals.items()) or "none"),
        f"  cost:      {tokens[0]} input + {tokens[1]} output tokens, ${cost:.6f}",
        f"  bodies:    {len(bundle['bodies'])} checked, {len(bundle['withheld'])} withheld",
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1].strip())
    parser.add_argument("bundle", help="the bundle file")
    parser.add_argument("--key", required=True, help="the log's verifier key file")
    parser.add_argument("--witness-key", action="append", default=[],
                        help="a witness's vkey, or its file (repeatable)")
    parser.add_argument("--quorum", type=int, help="cosignatures needed (default: all)")
    args = parser.parse_args(argv)
    try:
        key_text = Path(args.key).read_text(encoding="ascii").strip()
        key = (*parse_key(key_text), key_text)
        witnesses = list(dict.fromkeys(
            k if "+" in k else Path(k).read_text(encoding="ascii").strip()
            for k in args.witness_key))
        for k in witnesses:
            parse_key(k, alg=4)
        needed = len(witnesses) if args.quorum is None else args.quorum
        if (args.quorum is not None or witnesses) and not 0 < needed <= len(witnesses):
            raise ValueError(f"a quorum of {needed} needs as many distinct witness keys; "
                             f"{len(witnesses)} given")
        text = Path(args.bundle).read_bytes()
    except (OSError, UnicodeDecodeError, ValueError, binascii.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        print(summary(*check(text, key, (witnesses, needed) if witnesses else None)))
    except (Invalid, RecursionError) as exc:
        print(f"INVALID: {exc if isinstance(exc, Invalid) else 'nested too deeply'}")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
