"""Real ``overt serve`` processes sharing one ledger, for the many-workers tests.

Each worker is ``python -m overt.cli serve`` on its own 127.0.0.1 port, configured
by one ``overt.toml`` (the ledger URL, the instant model a plugin file registers,
a policy that asks before ``payroll`` and ``report``, and Slack when asked for). The
model answers at once: ``re: {text}``, or a ``payroll`` call when the text asks for
payroll, or a ``report`` call (a tool that runs until a file ``release`` appears in
the workers' directory) when it asks for a report.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

PLUGIN = '''
import os
import time

from overt.hooks import hookimpl
from overt.models.fake import FunctionModel
from overt.tools import tool


def reply(request):
    last = request.messages[-1]
    if last.role == "tool":
        return f"payroll: {last.content}"
    text = [m.content for m in request.messages if m.role == "user"][-1]
    if "payroll" in text:
        return {"tool_calls": [{"name": "payroll", "arguments": {"month": "2026-11"}}]}
    if "report" in text:
        return {"tool_calls": [{"name": "report", "arguments": {"name": "q4"}}]}
    return f"re: {text}"


@tool(read_only=True)
def payroll(month: str) -> dict:
    """Payroll total.

    Args:
        month: YYYY-MM.
    """
    return {"total": 42}


@tool(idempotent=True, timeout_s=600)
def report(name: str) -> dict:
    """A report that runs until the file ``release`` appears beside the config.

    Args:
        name: which report.
    """
    with open("runs", "a") as runs:
        runs.write(name + "\\n")
    while not os.path.exists("release"):
        time.sleep(0.05)
    return {"report": name}


@hookimpl
def register_models():
    return [FunctionModel(reply, name="instant")]


@hookimpl
def register_tools():
    return [payroll, report]
'''

CONFIG = '''
db = {db}
transcript = ""

[plugins]
enabled = ["instant"]
files = [{plugin}]

[[policy.rules]]
name = "payroll-asks"
effect = "ask"
reason_code = "payroll_is_private"
message = "payroll is shown after approval"
tools = ["payroll", "report"]
'''

SLACK = '''
[slack]
allowed_users = [{user}]
api_base_url = {api}
'''

T = TypeVar("T")
CLI = [sys.executable, "-m", "overt.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Setup:
    """The files every worker reads, and the environment it runs in."""

    directory: Path
    env: dict[str, str]
    token: str

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``overt ARGS`` as an operator would run it, beside the workers."""
        done = subprocess.run([*CLI, *args], env=self.env, cwd=self.directory,
                              capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"overt {' '.join(args)} exited {done.returncode}: "
                                 f"{done.stderr[-2000:]}")
        return done


def setup(directory: Path, db: str, *, slack_api: str | None = None,
          slack_user: str = "", slack_secret: str = "", slack_token: str = "") -> Setup:
    """Write the plugin, ``overt.toml`` and a token for ``operator:ops``."""
    (directory / "instant.py").write_text(PLUGIN)
    config = CONFIG.format(db=json.dumps(db), plugin=json.dumps(str(directory / "instant.py")))
    if slack_api is not None:
        config += SLACK.format(user=json.dumps(slack_user), api=json.dumps(slack_api))
    (directory / "overt.toml").write_text(config)
    import overt

    src = str(Path(overt.__file__).resolve().parents[1])  # this checkout's overt, not another
    path = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "OVERT_CONFIG": str(directory / "overt.toml"),
           "OVERT_TOKENS": str(directory / "tokens.json"),
           "OVERT_MODEL": "instant",  # a plugin's model: the file's checks do not know it
           "SLACK_SIGNING_SECRET": slack_secret, "SLACK_BOT_TOKEN": slack_token}
    for name in ("OVERT_DB", "OVERT_ROUTE", "OVERT_PLUGIN_FILES",
                 "OVERT_PLUGINS_ENABLED", "OVERT_TRANSCRIPT"):
        env.pop(name, None)
    made = Setup(directory, env, "")
    made.token = made.cli("serve", "--add-token", "operator:ops").stdout.strip()
    return made


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    url: str
    log: Path


@contextmanager
def workers(made: Setup, count: int) -> Iterator[list[Worker]]:
    """``count`` ``overt serve`` processes, up (``/healthz`` answers); stopped after."""
    with ExitStack() as stack:
        started = [stack.enter_context(_worker(made, n)) for n in range(count)]
        for worker in started:
            _wait_healthy(worker)
        yield started


@contextmanager
def _worker(made: Setup, number: int) -> Iterator[Worker]:
    port = free_port()
    log = made.directory / f"worker-{number}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([*CLI, "serve", "--port", str(port), "--no-mcp"],
                                   env=made.env, cwd=made.directory, stdout=out,
                                   stderr=subprocess.STDOUT)
    worker = Worker(process, f"http://127.0.0.1:{port}", log)
    try:
        yield worker
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_healthy(worker: Worker, timeout_s: float = 90.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker.process.poll() is not None:
            raise AssertionError(f"worker exited: {worker.log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{worker.url}/healthz", timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)  # a process starting: nothing to wait on but its port
    raise AssertionError(f"worker never answered /healthz: {worker.log.read_text()[-2000:]}")


def spread(items: Sequence[T], across: Sequence[Worker]) -> list[tuple[T, Worker]]:
    """Round-robin: item n goes to worker n mod len(across)."""
    return [(item, across[n % len(across)]) for n, item in enumerate(items)]
