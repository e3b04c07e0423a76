"""Sessions to bundle, and both verifiers to check them: ``overt check-bundle`` (in this
process) and verifier/overt_verify_bundle.py (always in a subprocess of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overt.cli.main import main
from overt.errors import LedgerIntegrityError
from overt.ledger import bundle
from overt.ledger.signing import read_public
from overt.memory.tools import memory_tools
from overt.models.fake import ScriptedModel
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.types import IncomingMessage
from tests.conftest import run
from tests.policy.helpers import effect_tools

VERIFIER = Path(__file__).resolve().parents[2] / "verifier" / "overt_verify_bundle.py"

BATCH = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("v", sys.argv[1])
v = importlib.util.module_from_spec(spec); spec.loader.exec_module(v)
text = open(sys.argv[2], encoding="ascii").read().strip()
key = (*v.parse_key(text), text)
for path in sys.argv[3:]:
    try:
        v.check(open(path, "rb").read(), key)
        print(json.dumps("valid"))
    except v.Invalid as exc:
        print(json.dumps("invalid: " + str(exc)))
    except RecursionError:
        print(json.dumps("invalid: nested"))
"""
"""Runs the standalone verifier's own ``check`` over many files in one subprocess (the
byte-flip test makes thousands)."""


def session(ledger: Any, tmp: Path) -> str:
    """A session of two turns: a lookup and a memory write, then a payment held for
    approval, approved by the operator, and made. Its id."""
    allow = Rule("memory.writes", "allow", "memory_writes", "the agent keeps its memory",
                 tools=("node_*", "link_*"))
    replies: list[Any] = [
        {"tool_calls": [{"name": "lookup", "arguments": {"query": "bob"}},
                        {"name": "node_create", "arguments": {
                            "kind": "Decision", "title": "Pay bob",
                            "body": "Bob is owed $5 — «payé» next week."}}]},
        "Looked bob up and noted it.",
        {"tool_calls": [{"name": "send_payment", "arguments": {"amount": 500, "to": "bob"}}]},
        "Paid bob $5.",
    ]
    rt = Runtime(model=ScriptedModel(replies), ledger=ledger,
                 tools=[*effect_tools(tmp / "payments"), *memory_tools()],
                 gate=Gate(Policy([allow])))

    def message(text: str) -> IncomingMessage:
        return IncomingMessage("cli", text, {"session_id": "s1"})

    first = run(rt.respond(message("who is bob?")))
    paused = run(rt.respond(message("pay bob"), session_id=first.session_id))
    assert paused.awaiting_approval
    run(rt.approve(paused.awaiting_approval, reason="bob is owed it"))
    return str(first.session_id)


def one_turn(ledger: Any, text: str = "hi") -> str:
    """A turn with no tool call (a small bundle); its id."""
    rt = Runtime(model=ScriptedModel(["hello"]), ledger=ledger, tools=[])
    result = run(rt.respond(IncomingMessage("cli", text, {"session_id": "small"})))
    return str(result.turn_id)


class Operator:
    """``overt`` on the test's ledger, with a key pair and a witness directory."""

    def __init__(self, url: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.url, self.tmp, self.capsys = url, tmp, capsys
        self.private, self.public = tmp / "keys" / "log.key", tmp / "keys" / "log.key.pub"
        self.witness = tmp / "witness"
        self.config = tmp / "overt.toml"
        self.config.write_text(f'[checkpoints]\nprivate_key = "{self.private}"\n'
                               f'witness_dir = "{self.witness}"\n', encoding="utf-8")
        assert self("ledger", "keygen", "--private", str(self.private), "--public",
                    str(self.public))[0] == 0

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(["--db", self.url, "--config", str(self.config), *argv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def export(self, name: str, *flags: str) -> Path:
        path = self.tmp / name
        code, _, err = self("export", "--bundle", str(path), *flags)
        assert code == 0, err
        return path

    def check(self, path: Path, key: Path | None = None) -> tuple[int, str]:
        """Both verifiers' verdict on ``path``, which must agree; (exit code, overt's
        output)."""
        code, out, _ = self("check-bundle", str(path), "--key", str(key or self.public))
        alone = standalone(path, key or self.public)
        assert alone.returncode == code, (out, alone.stdout, alone.stderr)
        assert "Traceback" not in alone.stderr + out
        return code, out

    def all_fail(self, paths: list[Path]) -> None:
        """That both verifiers refuse every one of ``paths``."""
        key = read_public(self.public)
        for path in paths:
            with pytest.raises(LedgerIntegrityError):
                bundle.check(path.read_bytes(), key)
        verdicts = standalone_many(paths, self.public)
        passed = [p.name for p, v in zip(paths, verdicts, strict=True)
                  if not v.startswith("invalid: ")]
        assert passed == [], passed


def standalone(path: Path, key: Path) -> subprocess.CompletedProcess[str]:
    """verifier/overt_verify_bundle.py on ``path``, isolated (-I: no PYTHONPATH, no user
    site; it imports nothing of overt anyway)."""
    return subprocess.run([sys.executable, "-I", str(VERIFIER), str(path), "--key", str(key)],
                          capture_output=True, text=True, timeout=60)


def standalone_many(paths: list[Path], key: Path) -> list[str]:
    """The standalone verifier's verdict on each of ``paths``, in one subprocess."""
    done = subprocess.run([sys.executable, "-I", "-c", BATCH, str(VERIFIER), str(key),
                           *map(str, paths)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(verdicts) == len(paths)
    return verdicts


def flipped(path: Path, directory: Path) -> list[Path]:
    """A copy of ``path`` per byte, that byte's lowest bit flipped, in ``directory``."""
    data = path.read_bytes()
    directory.mkdir()
    paths = []
    for i in range(len(data)):
        changed = bytearray(data)
        changed[i] ^= 0x01
        paths.append(directory / f"{i}.json")
        paths[-1].write_bytes(bytes(changed))
    return paths


def load(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return found
