"""Signed checkpoints made while ``overt serve`` runs: one after every
``every_entries`` new entries or ``every_seconds``, whichever comes first, when
anything was appended since the last (see :class:`.CheckpointSettings`).

A checkpoint that cannot be made (a witness down, a prune no checkpoint signed)
is logged as an error and tried again at the next interval; the server keeps
serving. A ledger that holds something no overt code path wrote (a stored Merkle
tile that is not the hash of its leaves, a ``ledger.pruned`` entry no prune wrote)
does not stop it: each checkpoint is still signed, from the entries themselves
and stating only what is really gone, and the finding is logged as an error with
every one, until the operator deals with it (see the README).

It never runs on a turn's path: it reads the head, and makes the checkpoint, from
its own task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from overt.errors import LedgerError
from overt.ledger import checkpoints
from overt.ledger.checkpoints import Checkpoint, CheckpointSettings
from overt.ledger.signing import PrivateKey

log = logging.getLogger("overt.ledger.checkpoints")

POLL_S = 2.0
"""How often the head is read, at most (less when ``every_seconds`` is shorter)."""


class Checkpointer:
    """Decides when a checkpoint is due and makes it."""

    def __init__(self, ledger: Any, key: PrivateKey, settings: CheckpointSettings, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ledger, self.key, self.settings, self.clock = ledger, key, settings, clock
        self.last_size: int | None = None
        self.last_at = clock()
        self.failures = 0

    async def tick(self) -> Checkpoint | None:
        """Make a checkpoint if one is due; the checkpoint made, if any.

        Raises:
            LedgerError: it was due and could not be made (see :func:`.checkpoints.make`).
        """
        head, _ = await checkpoints.state(self.ledger)
        if self.last_size is None:  # the witness's newest: what this process starts from
            directory = Path(self.settings.witness_dir)
            found = (checkpoints.read_witness_dir(directory, self.key.public)[0]
                     if directory.is_dir() else [])
            self.last_size = found[-1][1].size + 1 if found else 0
        grown = head - self.last_size
        if grown <= 0:  # (last_size counts the checkpoint's own entry: a quiet ledger
            return None  # is not signed again)
        if grown < self.settings.every_entries and \
                self.clock() - self.last_at < self.settings.every_seconds:
            return None
        self.last_at = self.clock()
        try:
            checkpoint, _ = await checkpoints.make(self.ledger, self.key, self.settings)
        except checkpoints.SignedWithFindings as exc:  # signed from the entries all the same:
            self.last_size = exc.checkpoint.size + 1  # the next one is due as usual, and
            raise  # the operator is told every time
        self.last_size = checkpoint.size + 1
        return checkpoint

    async def run(self) -> None:
        """Tick until cancelled."""
        poll = min(POLL_S, self.settings.every_seconds)
        while True:
            try:
                await self.tick()
                self.failures = 0
            except LedgerError as exc:
                self.failures += 1
                log.error("checkpoint failed (%d in a row): %s", self.failures, exc)
            await asyncio.sleep(poll)


def with_checkpoints(ledger: Any, key: PrivateKey, settings: CheckpointSettings,
                     inner: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
                     ) -> Callable[[], AbstractAsyncContextManager[None]]:
    """A lifespan (for :func:`overt.channels.http.create_app`) that runs a
    :class:`Checkpointer` while the server is up, around ``inner`` if given."""

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        task = asyncio.create_task(Checkpointer(ledger, key, settings).run(),
                                   name="overt-checkpoints")
        try:
            if inner is not None:
                async with inner():
                    yield
            else:
                yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return lifespan
