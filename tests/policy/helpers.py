"""Tools and runtimes the policy tests share: an effect that counts its runs in a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overt.ledger.base import Ledger
from overt.models.fake import ScriptedModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.tools.base import Tool, tool
from overt.types import IncomingMessage
from tests.conftest import run


def effect_tools(log: Path) -> list[Tool]:
    """``send_payment`` (mutating; appends a line to ``log`` per run) and ``lookup``
    (read-only; its result is whatever ``log.with_suffix('.page')`` holds)."""

    @tool
    def send_payment(amount: int, to: str) -> str:
        """Send money.

        Args:
            amount: in cents
            to: who gets it
        """
        with log.open("a", encoding="utf-8") as f:
            f.write(f"{amount} {to}\n")
        return f"sent {amount} to {to}"

    @tool(read_only=True)
    def lookup(query: str) -> str:
        """Look something up on the web."""
        page = log.with_suffix(".page")
        return page.read_text(encoding="utf-8") if page.exists() else "nothing found"

    return [send_payment, lookup]


def runs_of(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def runtime(ledger: Ledger, log: Path, replies: list[Any], *, rules: list[Rule] | None = None,
            grants: dict[str, list[str]] | None = None, ttl_s: float = 3600.0) -> Runtime:
    gate = Gate(Policy(rules or []), Capabilities(grants), approval_ttl_s=ttl_s)
    return Runtime(model=ScriptedModel(replies), ledger=ledger, tools=effect_tools(log),
                   gate=gate)


PAY = {"tool_calls": [{"name": "send_payment", "arguments": {"amount": 500, "to": "bob"}}]}


def ask(rt: Runtime, text: str = "pay bob 5 dollars", source: str = "cli") -> Any:
    metadata = {"session_id": "s1"} if source == "cli" else {
        "channel_id": "D1", "event_ts": "1.0"} if source == "slack_dm" else {"request_id": "r1"}
    return run(rt.respond(IncomingMessage(source, text, metadata)))  # type: ignore[arg-type]


def kinds(ledger: Ledger, turn_id: str) -> list[str]:
    return [e.kind for e in run(ledger.entries(turn_id=turn_id))]
