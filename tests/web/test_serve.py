"""``overt serve`` as a process serves the cockpit at ``/`` beside the API, and its
logins outlive the process."""

from __future__ import annotations

import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import pytest

from overt.web.auth import COOKIE
from tests.channels.helpers import free_port
from tests.web.conftest import cli_env

CLI = [sys.executable, "-m", "overt.cli"]


@contextmanager
def serving(tmp_path: Path) -> Iterator[str]:
    """``overt serve`` on the ledger in ``tmp_path``, on a free port; its base URL."""
    port = free_port()
    server = subprocess.Popen([*CLI, "serve", "--port", str(port), "--no-mcp", "--model",
                               f"scripted:{tmp_path / 'replies.jsonl'}"],
                              env=cli_env(tmp_path / "ledger.db"), cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # the server is up when /healthz answers
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield base
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()


@pytest.mark.slow
def test_overt_serve_serves_the_cockpit_and_a_login_outlives_a_restart(
        tmp_path: Path) -> None:
    (tmp_path / "replies.jsonl").write_text('{"text": "Served by overt serve."}\n')
    token = subprocess.run([*CLI, "serve", "--add-token", "operator:ops"],
                           env=cli_env(tmp_path / "ledger.db"), cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    with serving(tmp_path) as base:
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
            cookie = browser.cookies[COOKIE]
    key = tmp_path / "cockpit.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    with serving(tmp_path) as base:  # a second process, the same key file
        with httpx.Client(base_url=base, timeout=30, follow_redirects=False,
                          cookies={COOKIE: cookie}) as browser:
            again = browser.get("/live")
            assert again.status_code == 200 and "Served by overt serve." in again.text
        tampered = cookie[:-1] + ("B" if cookie[-1] == "A" else "A")
        refused = httpx.get(f"{base}/live", cookies={COOKIE: tampered})
        assert refused.status_code == 303 and refused.headers["location"] == "/login"


def test_the_cookie_key_is_beside_the_tokens_file_unless_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from overt.cli.serve_cmd import web_secret_path
    tokens = tmp_path / "deploy" / "tokens.json"
    monkeypatch.delenv("OVERT_WEB_SECRET_FILE", raising=False)
    assert web_secret_path(tokens, None) == tmp_path / "deploy" / "cockpit.key"
    monkeypatch.setenv("OVERT_WEB_SECRET_FILE", str(tmp_path / "env.key"))
    assert web_secret_path(tokens, None) == tmp_path / "env.key"
    assert web_secret_path(tokens, str(tmp_path / "flag.key")) == tmp_path / "flag.key"


@pytest.mark.slow
def test_overt_serve_shows_the_checkpoints_it_signs_as_verified_on_the_ledger_page(
        tmp_path: Path) -> None:
    (tmp_path / "replies.jsonl").write_text('{"text": "signed"}\n')
    (tmp_path / "overt.toml").write_text(
        f'[checkpoints]\nprivate_key = "{tmp_path / "keys" / "ledger.key"}"\n'
        f'witness_dir = "{tmp_path / "witness"}"\nevery_entries = 1\nevery_seconds = 0.2\n')
    env = cli_env(tmp_path / "ledger.db")
    subprocess.run([*CLI, "ledger", "keygen"], env=env, cwd=tmp_path, check=True,
                   capture_output=True)
    token = subprocess.run([*CLI, "serve", "--add-token", "operator:ops"], env=env,
                           cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout.strip()
    with serving(tmp_path) as base:
        httpx.post(f"{base}/v1/messages", json={"text": "sign me"},
                   headers={"Authorization": f"Bearer {token}"}, timeout=30)
        with httpx.Client(base_url=base, timeout=30) as browser:
            csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/login").text)
            assert csrf is not None
            browser.post("/login", data={"token": token, "csrf": csrf.group(1)})
            deadline = time.monotonic() + 60
            page = browser.get("/ledger").text
            while "holds no signed checkpoint" in page and time.monotonic() < deadline:
                time.sleep(0.2)  # the server signs on its own task, every_seconds apart
                page = browser.get("/ledger").text
    assert "signature verifies" in page and "overt-ledger+" in page
