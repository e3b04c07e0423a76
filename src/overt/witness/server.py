"""The witness's HTTP face: ``POST /add-checkpoint`` (C2SP tlog-witness) on the
standard library's threaded server, small enough to run anywhere."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from overt.ledger.signing import PublicKey
from overt.witness.add import Reply, add_checkpoint
from overt.witness.notes import WitnessSigner
from overt.witness.state import WitnessState

log = logging.getLogger(__name__)
MAX_BODY = 64 * 1024


def make_server(host: str, port: int, logs: dict[str, PublicKey], signer: WitnessSigner,
                state: WitnessState) -> ThreadingHTTPServer:
    """A server answering ``add-checkpoint`` for ``logs`` (origin → log key)."""
    lock = threading.Lock()  # one decision at a time per witness: its memory is one row

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/add-checkpoint":
                self._send(Reply(404, "text/plain; charset=utf-8", "not found\n"))
                return
            length = int(self.headers.get("Content-Length") or "0")
            if not 0 < length <= MAX_BODY:
                self._send(Reply(400, "text/plain; charset=utf-8", "bad length\n"))
                return
            body = self.rfile.read(length)
            with lock:
                reply = add_checkpoint(body, logs, signer, state, int(time.time()))
            if reply.status != 200:
                log.warning("add-checkpoint refused (%d): %s", reply.status, reply.body.strip())
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            data = reply.body.encode("utf-8")
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            log.info(format, *args)

    return ThreadingHTTPServer((host, port), Handler)
