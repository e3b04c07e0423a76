"""The outbound transcript: one JSONL line per reply the agent sent, on any channel.

``tools_used`` has three states: the key is absent when the engine was
bypassed, refused or errored; ``[]`` when it reasoned and chose no tool; the
tool names, oldest first with duplicates kept, otherwise. Consumers branch on
the key's presence.

Each line is written with a single ``write`` on a file opened for appending,
so lines from several processes never interleave.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from overt.clock import now_iso
from overt.types import ResponseResult


def transcript_line(result: ResponseResult, *, source: str, caller_session_id: str,
                    model: str, channel_ids: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The transcript entry for ``result``."""
    line: dict[str, Any] = {
        "at": now_iso(),
        "direction": "outbound",
        "turn_id": result.turn_id,
        "session_id": result.session_id,
        "source": source,
        "caller_session_id": caller_session_id,
        "model": model,
        "text": result.text,
    }
    if channel_ids:
        line["channel"] = dict(channel_ids)
    if result.error is not None:
        line["error"] = result.error.to_dict()
    if result.tools_used is not None:
        line["tools_used"] = list(result.tools_used)
    return line


class Transcript:
    """Appends transcript lines to one file, kept open for appending until :meth:`close`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def append(self, line: Mapping[str, Any]) -> None:
        """Append one line.

        Raises:
            OSError: the file cannot be written.
        """
        data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(self._fd, data)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
