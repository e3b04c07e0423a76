"""A case's starting data, written into its fresh ledger.

Usage records are real ``inference`` entries, pending approvals real
``approval.requested`` entries, memory real nodes and links written through
the memory store: the tools read them exactly as they read an operator's
own ledger, so their answers are fixed by the seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from overt.clock import iso_after
from overt.errors import UsageError
from overt.events import ApprovalRequested, Event, InferenceRecorded
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.memory.store import Writer, store_for


def _usage_events(rows: list[Any]) -> list[Event]:
    events: list[Event] = []
    for row in rows:
        if not isinstance(row, dict):
            raise UsageError("seed.usage: each row is an object")
        for _ in range(int(row.get("count", 1))):
            events.append(InferenceRecorded(
                turn_id=new_ulid(), session_id=row.get("session", "seed:usage"),
                inference_id=new_ulid(), iteration=0, model=str(row["model"]),
                route=str(row.get("route", "default")),
                input_tokens=int(row.get("input_tokens", 0)),
                output_tokens=int(row.get("output_tokens", 0)),
                cost_usd=float(row.get("cost_usd", 0.0)), duration_ms=1.0,
                tools_offered=[], tool_calls_requested=0, stop_reason="end_turn",
                response_digest=None))
    return events


def _approval_events(rows: list[Any]) -> list[Event]:
    events: list[Event] = []
    for row in rows:
        request_id = new_ulid()
        events.append(ApprovalRequested(
            turn_id=new_ulid(), session_id="seed:approvals", claim=request_id,
            request_id=request_id, mode="approval", decision_id=new_ulid(),
            tool_call_id=new_ulid(), tool_name=str(row["tool_name"]),
            args_sha256=digest_text(str(row.get("arguments", "{}"))),
            actor=str(row.get("actor", "operator:eval")), source=str(row.get("source", "cli")),
            reason_code="mutating_needs_approval", expires_at=iso_after(24 * 3600.0)))
    return events


async def seed_ledger(ledger: Ledger, seed: Mapping[str, Any], *, actor: str) -> dict[str, str]:
    """Write ``seed`` into ``ledger``; returns the seeded nodes' ids by ``ref``.

    Memory is written as ``actor`` (the agent, whose tools read it), so it is
    the agent's own memory.

    Raises:
        UsageError: the seed is malformed (a row lacks a field, a link names an
            unknown ref).
    """
    try:
        events = [*_usage_events(list(seed.get("usage", []))),
                  *_approval_events(list(seed.get("pending_approvals", [])))]
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"seed: malformed row: {exc}") from exc
    if events:
        await ledger.record(events)
    ids: dict[str, str] = {}
    roots: dict[str, str] = {}
    store = store_for(ledger)
    writer = Writer(actor, None, "seed:memory")
    for node in seed.get("memory", []):
        try:
            made = await store.create_node(str(node["kind"]), str(node["title"]),
                                           str(node["body"]), writer)
        except KeyError as exc:
            raise UsageError(f"seed.memory: a node needs kind, title, body: {exc}") from exc
        ref = str(node.get("ref", made.id))
        ids[ref], roots[ref] = made.id, made.root_id
    for link in seed.get("links", []):
        try:
            await store.create_link(str(link["kind"]), roots[link["from"]], roots[link["to"]],
                                    writer)
        except KeyError as exc:
            raise UsageError(f"seed.links: unknown field or ref {exc}") from exc
    return ids
