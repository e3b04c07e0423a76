from __future__ import annotations

from overt.cli.render import turn_record
from overt.ledger.base import Entry


def _entry(seq: int, kind: str, data: dict[str, object]) -> Entry:
    return Entry(seq, f"id{seq}", kind, "2026-11-21T00:00:00.000000Z", "T", "S", data, "p", "h")


def test_a_hook_entry_names_its_plugin_and_hook_and_shortens_digests() -> None:
    text = turn_record([_entry(6, "hook.blocked", {
        "plugin": "example", "hook": "pre_tool_call", "reason_code": "usage_history_blocked",
        "tool_name": "get_usage", "context_digest": "sha256:" + "a" * 64})], {})
    assert ("[6] hook.blocked by plugin example in pre_tool_call  "
            "context_digest=sha256:aaaaaaaaaaaa…  reason_code=usage_history_blocked  "
            "tool_name=get_usage") in text


def test_a_hook_entrys_content_is_shown_when_asked_for() -> None:
    digest = "sha256:" + "b" * 64
    text = turn_record([_entry(7, "hook.reissued", {
        "plugin": "router", "hook": "post_llm_call_can_reissue",
        "context_digest": digest})], {digest: "the cheap answer"})
    assert "context: the cheap answer" in text


def test_an_entry_of_another_kind_lists_its_fields() -> None:
    text = turn_record([_entry(9, "ledger.pruned", {"removed_entries": 4, "cutoff": "x"})], {})
    assert "[9] ledger.pruned  cutoff=x  removed_entries=4" in text
