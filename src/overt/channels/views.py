"""What the HTTP API and the MCP server both answer, as JSON: an approval request and
a reasoning trail; and how long either waits for a held turn's answer."""

from __future__ import annotations

from typing import Any

MAX_WAIT_S = 300.0
"""The longest a request may wait (``wait_s``) for the answer of a turn held for
approval."""


def request_json(r: Any) -> dict[str, Any]:
    return {
        "request_id": r.request_id, "status": r.status, "mode": r.mode,
        "turn_id": r.turn_id, "session_id": r.session_id, "tool_name": r.tool_name,
        "tool_call_id": r.tool_call_id, "actor": r.actor, "source": r.source,
        "reason_code": r.reason_code, "requested_at": r.requested_at,
        "expires_at": r.expires_at, "decided_by": r.decided_by, "decided_at": r.decided_at,
        "resumed": r.resumed,
    }


def trail_json(trail: Any) -> dict[str, Any]:
    """A trail as JSON: turns in order, each with its records in ledger order."""
    return {
        "session_id": trail.session_id,
        "turns": [{
            "turn_id": t.turn_id, "session_id": t.session_id, "started_at": t.started_at,
            "source": t.source, "model": t.model, "message": t.message, "status": t.status,
            "completed_at": t.completed_at, "paused_on": t.paused_on,
            "records": [{"type": type(r).__name__, **r._asdict()} for r in t.records()],
        } for t in trail.turns],
    }
