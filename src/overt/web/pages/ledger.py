"""The Ledger page: how many entries, the last ``verify`` and its result, a button to
run it again.

A verify recomputes the whole chain (and every body against its digest), which
on a large ledger takes seconds. It runs as one job per server, off the event
loop (both backends read on threads or connections of their own), and the page
follows it until the report comes, polling a fragment every half second: the
rows checked of the rows to check, as the ledger's ``verify(progress=...)``
reports them, and the time so far. The last result is kept by this process (a
restart forgets it; ``overt ledger verify`` answers from a terminal). The newest
signed checkpoint on the record is shown with whether its signature verifies
(:mod:`.checkpoint`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from overt.clock import now_iso
from overt.errors import OvertError
from overt.ledger.base import VerifyReport
from overt.ledger.reads import web
from overt.ledger.reads.base import readable
from overt.ledger.signing import PublicKey
from overt.runtime import Runtime
from overt.web.auth import Login
from overt.web.pages.checkpoint import newest
from overt.web.render import fragment, page
from overt.web.viewer import LEDGER, Viewer

log = logging.getLogger("overt.web.ledger")


@dataclass(slots=True)
class VerifyJob:
    """One run of verify: when it started, by whom, and (once done) its report."""

    by: str
    started_at: str
    started: float
    entries: int
    checked: int = 0
    total: int | None = None
    """Rows checked and rows to check, as the verify last reported (``None``: not
    counted yet); written from the thread the verify reads on."""
    report: VerifyReport | None = None
    error: str | None = None
    finished_at: str | None = None
    seconds: float | None = None

    @property
    def running(self) -> bool:
        return self.report is None and self.error is None

    def progress(self, checked: int, total: int) -> None:
        self.checked, self.total = checked, total

    @property
    def share(self) -> float | None:
        """How much of the verify is done (0 to 1), once its rows are counted."""
        if self.total is None:
            return None
        return self.checked / self.total if self.total else 1.0


class LedgerPage:
    def __init__(self, runtime: Runtime, checkpoint_key: PublicKey | None = None) -> None:
        self.runtime = runtime
        self.checkpoint_key = checkpoint_key
        self.job: VerifyJob | None = None
        self._task: asyncio.Task[None] | None = None

    async def _count(self) -> tuple[int, int]:
        if not readable(self.runtime.ledger):  # a ledger of a third party's: nothing to count
            return 0, 0
        return await web.size(self.runtime.ledger)

    async def page(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(LEDGER):
            return page("denied.html", viewer, login, active="ledger", status=403,
                        capability=LEDGER)
        count, head = await self._count()
        return page("ledger.html", viewer, login, active="ledger", count=count, head=head,
                    backend=getattr(self.runtime.ledger, "backend", "?"),
                    status_html=self._status(),
                    checkpoint=await newest(self.runtime.ledger, self.checkpoint_key))

    def _status(self) -> str:
        job = self.job
        elapsed = time.monotonic() - job.started if job is not None and job.running else None
        return fragment("_verify.html", job=job, elapsed=elapsed)

    async def status(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(LEDGER):
            return Response("runtime.read is needed", status_code=403)
        return Response(self._status(), media_type="text/html")

    async def start(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(LEDGER):
            return page("denied.html", viewer, login, active="ledger", status=403,
                        capability=LEDGER)
        if self.job is None or not self.job.running:
            count, _ = await self._count()
            self.job = VerifyJob(viewer.name, now_iso(), time.monotonic(), count)
            self._task = asyncio.get_running_loop().create_task(self._run(self.job))
        return RedirectResponse("/ledger", status_code=303)

    async def _run(self, job: VerifyJob) -> None:
        ledger = self.runtime.ledger
        try:
            job.report = await ledger.verify(progress=job.progress)
        except OvertError as exc:  # shown on the page, and logged
            log.error("verify from the cockpit failed: %s", exc)
            job.error = str(exc)
        job.finished_at = now_iso()
        job.seconds = time.monotonic() - job.started
