"""The scripted model's file: every way it can be unreadable is a UsageError naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.errors import UsageError
from overt.models.fake import ScriptedModel


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b'{"text": "caf\xe9"}\n'])
def test_a_scripted_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path,
                                                           content: bytes) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_bytes(content)
    with pytest.raises(UsageError, match=f"cannot read scripted model file {replies}"):
        ScriptedModel.from_jsonl(replies)


def test_a_scripted_file_that_is_a_folder_or_missing_is_a_usage_error(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "absent.jsonl"):
        with pytest.raises(UsageError, match="cannot read scripted model file"):
            ScriptedModel.from_jsonl(path)
