from __future__ import annotations

from overt.cli.render import turn_record
from overt.events import Event, HookReissued, HookTransformed
from overt.ledger.base import Entry


def _entry(seq: int, kind: str, data: dict[str, object]) -> Entry:
    return Entry(seq, f"id{seq}", kind, "2026-11-21T00:00:00.000000Z", "T", "S", data, "p", "h")


def _recorded(seq: int, event: Event) -> Entry:
    return _entry(seq, event.kind, event.data())


def test_a_hook_entry_names_its_plugin_and_hook_and_shortens_digests() -> None:
    text = turn_record([_recorded(6, HookTransformed(
        plugin="example", hook="transform_tool_result", tool_call_id="call_1",
        before_digest="sha256:" + "a" * 64, after_digest="sha256:" + "c" * 64))], {})
    assert ("[6] hook.transformed by plugin example in transform_tool_result  "
            "after_digest=sha256:cccccccccccc…  before_digest=sha256:aaaaaaaaaaaa…  "
            "tool_call_id=call_1") in text


def test_a_hook_entrys_content_is_shown_when_asked_for() -> None:
    digest = "sha256:" + "b" * 64
    text = turn_record([_recorded(7, HookReissued(
        plugin="router", hook="post_llm_call_can_reissue", iteration=0, from_model="cheap",
        to_model="strong", reason_code="low_confidence", context_digest=digest))],
        {digest: "the cheap answer"})
    assert "context: the cheap answer" in text


def test_an_entry_of_a_kind_this_version_does_not_know_lists_its_fields() -> None:
    text = turn_record([_entry(8, "turn.annotated", {"note_digest": "sha256:" + "d" * 64})], {})
    assert "[8] turn.annotated  note_digest=sha256:dddddddddddd…" in text


def test_an_entry_of_another_kind_lists_its_fields() -> None:
    text = turn_record([_entry(9, "ledger.pruned", {"removed_entries": 4, "cutoff": "x"})], {})
    assert "[9] ledger.pruned  cutoff=x  removed_entries=4" in text
