from __future__ import annotations

import pytest

from overt.errors import UsageError
from overt.types import IncomingMessage, derive_caller_session_id


@pytest.mark.parametrize(("source", "metadata", "expected"), [
    ("slack_dm", {"channel_id": "D123", "event_ts": "1700000000.0001"}, "D123:1700000000.0001"),
    ("slack_dm", {"channel_id": "D123"}, "D123:unknown"),
    ("slack_dm", {}, "unknown:unknown"),
    ("email", {"message_id": "<a@b>"}, "email:<a@b>"),
    ("email", {"message_id": ""}, "email:unknown"),
    ("mcp", {"caller_actor_kind": "agent", "tool_name": "ask"}, "mcp:agent:ask"),
    ("mcp", {"tool_name": "ask"}, "mcp:unknown:ask"),
    ("cli", {"session_id": "S1"}, "cli:S1"),
    ("cli", {}, "cli:unknown"),
    ("http", {"request_id": "R9"}, "http:R9"),
])
def test_caller_session_id_has_the_shape_of_its_source(
    source: str, metadata: dict[str, str], expected: str
) -> None:
    assert derive_caller_session_id(source, metadata) == expected
    assert IncomingMessage(source, "x", metadata).caller_session_id == expected  # type: ignore[arg-type]


def test_an_unknown_source_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown message source"):
        IncomingMessage("fax", "x")  # type: ignore[arg-type]
