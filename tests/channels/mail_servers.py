"""Real mail servers for the email tests: Dovecot (IMAP) started from a config written
under a temporary folder, and aiosmtpd (SMTP) keeping what it is sent.

Dovecot runs in the foreground (``dovecot -F -c CONF``), no systemd, on a free port,
with one passwd-file user and a maildir of its own. Outside CI a machine without
Dovecot skips these tests; in CI (``.ci/run`` installs dovecot-imapd) it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from email.policy import default
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from tests import needs

USER, PASSWORD = "agent", "imap-test-password"
NOBODY = 65534  # Dovecot will not deliver mail as root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def dovecot_binary() -> str:
    found = shutil.which("dovecot") or (
        "/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None)
    if found is None:
        needs.missing("Dovecot is not installed (apt-get install dovecot-imapd)")
    return found


@dataclass
class Imap:
    host: str
    port: int
    user: str = USER
    password: str = PASSWORD


@contextmanager
def dovecot(tmp_path: Path) -> Iterator[Imap]:
    binary = dovecot_binary()
    port = free_port()
    uid, gid = (os.getuid(), os.getgid()) if os.getuid() != 0 else (NOBODY, NOBODY)
    # Dovecot's unprivileged processes must reach the passwd file and the maildir:
    # pytest's folders are private to their owner, so all of it lives in a folder of its own
    root = Path(tempfile.mkdtemp(prefix="overt-dovecot-"))
    root.chmod(0o755)
    mail_root = root / "mail"
    (mail_root / USER).mkdir(parents=True)
    os.chown(mail_root / USER, uid, gid)
    tmp_path = root
    (tmp_path / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
    conf = tmp_path / "dovecot.conf"
    conf.write_text(f"""
protocols = imap
listen = 127.0.0.1
base_dir = {tmp_path}/run
state_dir = {tmp_path}/state
log_path = {tmp_path}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
mail_location = maildir:{mail_root}/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {tmp_path}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={mail_root}/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
""")
    process = subprocess.Popen([binary, "-F", "-c", str(conf)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        _wait_for_port(port, process, tmp_path / "dovecot.log")
        yield Imap("127.0.0.1", port)
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            logged = log.read_text() if log.exists() else ""
            raise RuntimeError(f"dovecot exited {process.returncode}: {err}{logged}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)  # polling a port with a deadline: nothing to wait on
    raise TimeoutError(f"dovecot did not listen on {port}")


@dataclass
class SmtpSink:
    """Keeps every message it is sent, parsed."""

    messages: list[Message] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            self.messages.append(BytesParser(policy=default).parsebytes(envelope.content))
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"


@contextmanager
def smtp_server() -> Iterator[tuple[SmtpSink, int]]:
    sink = SmtpSink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield sink, port
    finally:
        controller.stop()
