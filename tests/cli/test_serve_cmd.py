"""``overt serve`` as a process: a turn in flight when SIGTERM arrives finishes,
answers its request and is recorded whole before the server exits, with status 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from overt.ledger import open_ledger
from tests.conftest import run

PLUGIN = '''
import pathlib, time
from overt.hooks import hookimpl
from overt.tools import tool

@tool(read_only=True)
def slow_lookup(key: str) -> str:
    """Look a key up, slowly."""
    pathlib.Path(__file__).with_suffix(".started").write_text("started")
    time.sleep(1.5)
    return key.upper()

@hookimpl
def register_tools():
    return [slow_lookup]
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_sigterm_lets_the_turn_in_flight_finish_records_it_and_exits_0(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(PLUGIN)
    (tmp_path / "replies.jsonl").write_text(
        '{"tool_calls": [{"name": "slow_lookup", "arguments": {"key": "abc"}}]}\n'
        '{"text": "It is ABC."}\n')
    db = tmp_path / "ledger.db"
    env = {**os.environ, "OVERT_DB": str(db), "OVERT_TRANSCRIPT": "",
           "OVERT_PLUGIN_FILES": str(tmp_path / "slow.py"), "OVERT_PLUGINS_ENABLED": "slow"}
    cli = [sys.executable, "-m", "overt.cli"]
    token = subprocess.run([*cli, "serve", "--add-token", "operator:ops"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    port = _free_port()
    server = subprocess.Popen([*cli, "serve", "--port", str(port), "--no-mcp", "--model",
                               f"scripted:{tmp_path / 'replies.jsonl'}"], env=env, cwd=tmp_path)
    answer: dict[str, Any] = {}
    try:
        for _ in range(600):  # the server is up when /healthz answers
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/messages", method="POST",
            data=json.dumps({"text": "look up abc"}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})

        def ask() -> None:
            with urllib.request.urlopen(request, timeout=60) as response:
                answer.update(json.loads(response.read()))
        asking = threading.Thread(target=ask)
        asking.start()
        started = tmp_path / "slow.started"
        for _ in range(600):
            if started.exists():
                break
            time.sleep(0.02)
        assert started.exists(), "the tool never started"
        server.send_signal(signal.SIGTERM)  # mid-tool: the turn must still finish
        asking.join(timeout=60)
        assert server.wait(timeout=60) == 0  # a stop asked for is a clean exit
    finally:
        if server.poll() is None:
            server.kill()
    assert answer["text"] == "It is ABC." and answer["tools_used"] == ["slow_lookup"]
    ledger: Any = open_ledger(str(db))
    try:
        completed = run(ledger.entries(kinds=["turn.completed"]))
        assert [e.data["status"] for e in completed] == ["completed"]
        assert run(ledger.verify()).ok
    finally:
        ledger.close_sync()
