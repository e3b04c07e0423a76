"""A private PostgreSQL cluster for one test, which it may stop and restart.

The shared server on 127.0.0.1:5432 is never restarted (other tests use it): a
test that needs PostgreSQL to go away makes its own cluster with ``initdb`` in a
temporary directory and runs it on a free port with ``pg_ctl``, as the
``postgres`` OS user when run as root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin directory with initdb and pg_ctl, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if
                   Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def why_unavailable() -> str | None:
    """Why a private cluster cannot be made here, or ``None`` when it can."""
    if binaries() is None:
        return "initdb and pg_ctl are not installed"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser (PostgreSQL refuses to run as root)"
    if os.geteuid() == 0:
        try:
            import pwd
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres OS user to run the cluster as"
    return None


@dataclass
class Cluster:
    bin: Path
    data: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data),
                        "-l", str(self.data / "server.log"), "-w", "-t", "60", *args],
                       check=True, capture_output=True, timeout=90)

    def restart(self) -> None:
        """Stop at once (sessions terminated, transactions rolled back), start again."""
        self.pg_ctl("restart", "-m", "fast")


@contextmanager
def cluster() -> Iterator[Cluster]:
    """A running private cluster (trust auth, 127.0.0.1 only); removed afterwards."""
    bin_dir = binaries()
    assert bin_dir is not None
    root = Path(tempfile.mkdtemp(prefix="overt-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    port = free_port()
    subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-A", "trust",
                    "-U", "postgres", "--no-sync", "-E", "UTF8"],
                   check=True, capture_output=True, timeout=120)
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(f"\nport = {port}\nlisten_addresses = '127.0.0.1'\n"
                   f"unix_socket_directories = '{root}'\nmax_connections = 50\n")
    made = Cluster(bin_dir, data, port, as_user)
    made.pg_ctl("start")
    try:
        yield made
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "-w", "stop"], capture_output=True, timeout=90)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def private_cluster_or_skip() -> Iterator[Cluster]:
    """:func:`cluster`, or the test skipped saying why one cannot be made here
    (failed in CI, where one must be)."""
    from tests import needs

    why = why_unavailable()
    if why is not None:
        needs.missing(f"a private PostgreSQL cluster cannot be made: {why}")
    with cluster() as made:
        yield made
