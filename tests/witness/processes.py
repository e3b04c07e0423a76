"""``overt witness serve`` in its own process, for tests."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def overt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "overt.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@dataclass
class Witness:
    process: subprocess.Popen[str]
    url: str
    vkey: str
    state: Path

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        assert self.process.stderr is not None
        self.process.stderr.close()


def start_witness(directory: Path, name: str, logs: list[tuple[str, Path]]) -> Witness:
    """A witness process on a free port (the OS picks it; the process says which)."""
    directory.mkdir(parents=True, exist_ok=True)
    made = overt("witness", "keygen", "--name", name, "--private", "w.key", cwd=directory)
    assert made.returncode == 0, made.stderr
    args = ["witness", "serve", "--key", "w.key", "--state", "w.sqlite", "--port", "0"]
    for origin, public in logs:
        args += ["--log", origin, str(public)]
    env = {**os.environ, "PYTHONPATH": SRC}
    process = subprocess.Popen([sys.executable, "-m", "overt.cli", *args], cwd=directory,
                               env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()  # blocks until the server is listening
    if "http://" not in line:
        process.kill()
        raise AssertionError(f"the witness did not start: {line}{process.stderr.read()}")
    return Witness(process, line.split()[-1], made.stdout.strip(), directory / "w.sqlite")


def post(url: str, body: bytes) -> tuple[int, str, str]:
    request = urllib.request.Request(url + "/add-checkpoint", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()
