"""A running server takes up decided approvals that no process resumed.

An approval decided just as its process lost the ledger (or stopped) may be
committed while its resumption is not; the turn would wait for the next worker to
start or for ``overt approvals resume``. While ``overt serve`` runs, it looks for
such decisions about once a minute (:meth:`overt.runtime.Runtime.resume_decided`:
a read of the approval kinds alone) and takes them up, as a worker does when it
starts. Only decisions older than ``settled_s``: a decision just made is the
deciding process's to resume (were both to try, the resumption is a claim, so one
runs it). Calls that started and recorded no result are not touched: on the record
they look the same as one another worker is running now (``overt approvals resume``).
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from overt.channels.repeating import repeating
from overt.errors import LedgerUnavailable, OvertError

if TYPE_CHECKING:
    from overt.runtime import Runtime

log = logging.getLogger("overt.serve")

TAKE_UP_EVERY_S = 60.0
"""How often a server looks for decided approvals nobody took up."""
SETTLED_S = 30.0
"""How old a decision must be before a server that did not make it takes it up."""


async def take_up_once(runtime: Runtime, settled_s: float = SETTLED_S) -> int:
    """One look: how many requests were taken up. A ledger out of reach is logged
    at INFO (the outage itself is logged by the ledger) and tried at the next look;
    another failure is logged as a warning and tried again too.
    """
    try:
        resumed = await runtime.resume_decided(settled_s=settled_s)
    except LedgerUnavailable as exc:
        log.info("decided approvals not looked for: %s", exc)
        return 0
    except OvertError as exc:  # one bad request must not stop the server's later looks
        log.warning("taking up decided approvals failed: %s: %s", type(exc).__name__, exc)
        return 0
    if resumed:
        log.info("took up %d decided approval(s) no process had resumed", len(resumed))
    return len(resumed)


def taking_up(runtime: Runtime, *, every_s: float | None = TAKE_UP_EVERY_S,
              settled_s: float = SETTLED_S) -> AbstractAsyncContextManager[None]:
    """While the block runs, :func:`take_up_once` every ``every_s`` seconds (``None``:
    never)."""
    return repeating(lambda: take_up_once(runtime, settled_s), every_s, "overt-take-up")
