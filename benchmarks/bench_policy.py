"""What the gate costs per tool call, with a 50-rule policy.

The rule table is built so that every rule has to be looked at: 40 rules match
every tool and carry argument conditions that do not hold for the call (so each
is evaluated and passed over), 10 name other tools; the call then falls through
to the defaults. Measured per call:

- ``Policy.decide`` alone (candidates cached per tool, source, route, actor),
- the same on a cold cache (the first call of a tool from a place),
- the whole gate (capability check, policy, the ``policy.decision`` event with
  its ULID) as the engine runs it for every tool call.

Target: under 30 µs per tool call with 50 rules.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from benchmarks._stats import quietest, row, summary
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Condition, Rule
from overt.tools.base import tool

ROUNDS = 7
BLOCK = 2000


@tool(read_only=False)
def transfer(account: str, amount: int, memo: str = "") -> str:
    """Move money."""
    return "ok"


def fifty_rules() -> list[Rule]:
    rules = []
    for i in range(40):
        rules.append(Rule(
            f"r{i}", ("deny", "ask", "quarantine")[i % 3], f"reason_{i}", priority=i % 7,
            sources=("cli", "http", "mcp") if i % 2 else None,
            when=(Condition("account", "glob", f"acct-{i}-*"),
                  Condition("amount", "gt", 1_000_000 + i),
                  Condition("memo", "regex", rf"\bcode{i}\b"))))
    for i in range(10):
        rules.append(Rule(f"other{i}", "deny", f"other_{i}", tools=(f"drop_{i}_*",)))
    return rules


ARGS = {"account": "acct-x-1", "amount": 25, "memo": "rent for november"}


def _time(call: Callable[[], None], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - started) / 1000)
    return samples


def measure() -> dict[str, float]:
    policy = Policy(fifty_rules())
    gate = Gate(policy, Capabilities())
    actor = Actor.agent("default")
    assert len(policy.rules) == 50 + 4

    def decide() -> None:
        policy.decide("transfer", ARGS, source="cli", route="default", actor="agent:default",
                      mutating=True)

    def cold() -> None:
        policy._candidates.clear()
        decide()

    def check() -> None:
        gate.check(tool_name="transfer", tool=transfer, arguments=ARGS,
                   args_digest="sha256:00", tool_call_id="call_1", actor=actor, source="cli",
                   route="default", turn_id="t", session_id="s")

    d = policy.decide("transfer", ARGS, source="cli", route="default", actor="agent:default",
                      mutating=True)
    assert d.rule == "default.mutating_needs_approval" and len(d.rules_evaluated) == 41, d
    blocks: dict[str, list[list[float]]] = {"decide": [], "cold": [], "gate": []}
    for _ in range(ROUNDS):
        blocks["decide"].append(_time(decide, BLOCK))
        blocks["cold"].append(_time(cold, BLOCK // 10))
        blocks["gate"].append(_time(check, BLOCK))
    print("  " + "whole gate, all samples:".ljust(44),
          summary([x for block in blocks["gate"] for x in block]))
    return {name: quietest(b) for name, b in blocks.items()}


def main() -> dict[str, float]:
    print("policy: the gate per tool call, 50 rules (41 evaluated, defaults decide)")
    figures = measure()
    row("Policy.decide, candidates cached", f"median {figures['decide']:6.1f} µs")
    row("Policy.decide, cold (first call from a place)", f"median {figures['cold']:6.1f} µs")
    row("whole gate: capability + policy + record event",
        f"median {figures['gate']:6.1f} µs   (target < 30 µs)")
    return {"policy_decide_us": figures["decide"], "policy_cold_us": figures["cold"],
            "policy_gate_us": figures["gate"]}


if __name__ == "__main__":
    main()
