"""A case's starting data, written into its fresh ledger.

Usage records are real ``inference`` entries, pending approvals real
``approval.requested`` entries, memory real nodes and links written through
the memory store: the tools read them exactly as they read an operator's
own ledger, so their answers are fixed by the seed.

A usage row with ``days_ago`` N (N > 0) lies on the calendar day N days
before the eval's today (UTC, at noon): :func:`seed_past` writes those rows
with that time, into the case's ledger file before the runtime opens it, so
the ledger's entries stay in time order. A memory row with ``revises`` REF is
a new revision of the node seeded as REF (a revision supersedes the one
before it, as ``node_supersede`` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from overt.clock import iso_after, to_iso
from overt.errors import UsageError
from overt.events import ApprovalRequested, Event, InferenceRecorded
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.ledger.sqlite import SqliteLedger
from overt.memory.store import MemoryStore, Writer, store_for


def days_ago(row: Mapping[str, Any]) -> int:
    """The row's ``days_ago`` (0: today, written with the rest of the seed).

    Raises:
        UsageError: it is not a whole number of days, 0 or more.
    """
    value = row.get("days_ago", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"seed.usage: days_ago must be a whole number, 0 or more, "
                         f"not {value!r}")
    return value


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


def _rows(seed: Mapping[str, Any], table: str) -> list[Any]:
    rows = seed.get(table, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"seed.{table}: a list of objects")
    return rows


def noon(days: int, now: datetime | None = None) -> str:
    """Noon (UTC) of the calendar day ``days`` before ``now``'s, in the ledger's format."""
    day = (now or datetime.now(UTC)).astimezone(UTC) - timedelta(days=days)
    return to_iso(day.replace(hour=12, minute=0, second=0, microsecond=0))


async def seed_past(path: str | Path, seed: Mapping[str, Any], *,
                    now: datetime | None = None) -> int:
    """Write the usage rows of ``seed`` that lie on earlier days (``days_ago`` > 0)
    into the SQLite ledger at ``path``, oldest first, each stamped noon of its day;
    returns how many entries were written. Call it before anything else writes to
    ``path``, so that the ledger's times run in order.

    Raises:
        UsageError: the seed is malformed.
    """
    by_day: dict[int, list[Any]] = {}
    for row in _rows(seed, "usage"):
        if (days := days_ago(row)) > 0:
            by_day.setdefault(days, []).append(row)
    if not by_day:
        return 0
    stamp = [""]
    ledger = SqliteLedger.open(path, clock=lambda: stamp[0])
    written = 0
    try:
        for days in sorted(by_day, reverse=True):
            stamp[0] = noon(days, now)
            try:
                events = _usage_events(by_day[days])
            except (KeyError, TypeError, ValueError) as exc:
                raise UsageError(f"seed: malformed row: {exc}") from exc
            written += len(await ledger.record(events))
    finally:
        await ledger.close()
    return written


async def seed_ledger(ledger: Ledger, seed: Mapping[str, Any], *, actor: str) -> dict[str, str]:
    """Write ``seed`` into ``ledger``, but for the usage of earlier days
    (:func:`seed_past`); returns the seeded nodes' ids by ``ref``.

    Memory is written as ``actor`` (the agent, whose tools read it), so it is
    the agent's own memory.

    Raises:
        UsageError: the seed is malformed (a row lacks a field, a link or a revision
            names an unknown ref).
    """
    try:
        today = [row for row in _rows(seed, "usage") if days_ago(row) == 0]
        events = [*_usage_events(today),
                  *_approval_events(_rows(seed, "pending_approvals"))]
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"seed: malformed row: {exc}") from exc
    if events:
        await ledger.record(events)
    ids: dict[str, str] = {}
    roots: dict[str, str] = {}
    store = store_for(ledger)
    writer = Writer(actor, None, "seed:memory")
    for node in _rows(seed, "memory"):
        if "revises" in node:
            ids_ref, made = await _revise(store, roots, node, writer)
            ids[ids_ref] = made
            continue
        try:
            created = await store.create_node(str(node["kind"]), str(node["title"]),
                                              str(node["body"]), writer)
        except KeyError as exc:
            raise UsageError(f"seed.memory: a node needs kind, title, body: {exc}") from exc
        ref = str(node.get("ref", created.id))
        ids[ref], roots[ref] = created.id, created.root_id
    for link in _rows(seed, "links"):
        try:
            await store.create_link(str(link["kind"]), roots[link["from"]], roots[link["to"]],
                                    writer)
        except KeyError as exc:
            raise UsageError(f"seed.links: unknown field or ref {exc}") from exc
    return ids


async def _revise(store: MemoryStore, roots: dict[str, str], node: Mapping[str, Any],
                  writer: Writer) -> tuple[str, str]:
    """A new revision of the node ``node["revises"]`` names: (its ref, its id); the
    ref it revises names the same chain, so a later revision may name either."""
    target = str(node["revises"])
    if target not in roots:
        raise UsageError(f"seed.memory: revises {target!r}, which no earlier node is")
    current = await store.current(roots[target])
    if current is None:
        raise UsageError(f"seed.memory: the node {target!r} has no current revision")
    title = str(node.get("title", current.title))
    body = str(node.get("body", current.body))
    revised = await store.supersede(current, title, body, writer)
    ref = str(node.get("ref", revised.id))
    roots[ref] = revised.root_id
    return ref, revised.id
