"""``overt serve`` as a process serves the cockpit at ``/`` beside the API."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx

from tests.channels.helpers import free_port
from tests.web.conftest import cli_env


def test_overt_serve_serves_the_cockpit_and_a_logged_in_page_shows_an_api_turn(
        tmp_path: Path) -> None:
    (tmp_path / "replies.jsonl").write_text('{"text": "Served by overt serve."}\n')
    env = cli_env(tmp_path / "ledger.db")
    cli = [sys.executable, "-m", "overt.cli"]
    token = subprocess.run([*cli, "serve", "--add-token", "operator:ops"], env=env,
                           cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout.strip()
    port = free_port()
    server = subprocess.Popen([*cli, "serve", "--port", str(port), "--no-mcp", "--model",
                               f"scripted:{tmp_path / 'replies.jsonl'}"], env=env, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # the server is up when /healthz answers
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        answer = httpx.post(f"{base}/v1/messages", json={"text": "hello cockpit"},
                            headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
        with httpx.Client(base_url=base, timeout=30, follow_redirects=False) as browser:
            assert browser.get("/").headers["location"] == "/login"
            form = browser.get("/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form)
            assert csrf is not None
            browser.post("/login", data={"token": token, "csrf": csrf.group(1)})
            live = browser.get("/live")
            assert live.status_code == 200
            assert f'id="turn-{answer["turn_id"]}"' in live.text
            assert "Served by overt serve." in live.text
            assert browser.get("/static/htmx.min.js").status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
