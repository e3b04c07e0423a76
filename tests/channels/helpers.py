"""Runtimes whose calls wait for approval (get_usage; a payroll tool), and tokens for
three actors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overt.channels.auth import Tokens, token_digest
from overt.channels.transcript import Transcript
from overt.ledger.base import Ledger
from overt.models.base import Model
from overt.models.fake import ScriptedModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.tools import tool

OPERATOR = "op-token"
CLIENT = "client-token"
APPROVER = "approver-token"
TOKENS = Tokens({token_digest(OPERATOR): "operator:alice",
                 token_digest(CLIENT): "mcp_client:claude-code",
                 token_digest(APPROVER): "mcp_client:approver"})

USAGE_CALL = {"tool_calls": [{"name": "get_usage", "arguments": {}}]}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_runtime(ledger: Ledger, tmp_path: Path, replies: list[Any]) -> Runtime:
    """Built-in tools; get_usage needs approval; ``mcp_client:approver`` may decide."""
    gate = Gate(Policy([Rule("usage-is-private", "ask", "usage_is_private",
                             "usage figures are shown after approval",
                             tools=("get_usage",))]),
                Capabilities({"mcp_client:approver": [
                    "agent.ask", "trail.read", "approvals.read", "approvals.decide",
                    "memory.read"]}))
    return Runtime(model=ScriptedModel(replies), ledger=ledger,
                   transcript=Transcript(tmp_path / "transcript.jsonl"), gate=gate)


def payroll_runtime(ledger: Ledger, model: Model) -> Runtime:
    """A runtime with one tool, ``payroll``, whose every call asks for approval."""
    @tool(read_only=True)
    async def payroll(month: str) -> dict[str, int]:
        """Payroll total.

        Args:
            month: YYYY-MM.
        """
        return {"total": 42}

    gate = Gate(Policy([Rule("payroll-asks", "ask", "payroll_is_private",
                             "payroll is shown after approval", tools=("payroll",))]))
    return Runtime(model=model, ledger=ledger, tools=[payroll], gate=gate)
