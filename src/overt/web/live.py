"""The Live page: turns from every channel as they are recorded, pushed over SSE.

One :class:`LiveHub` per server follows the ledger for every open page: it
reads the entries appended past the last it saw (``seq >``), and hands each
batch to the pages' queues. It is woken at once by this process's appends
(:attr:`Ledger.appended`); another process's (``overt approvals approve`` in a
terminal, another worker) are read within :attr:`LiveHub.ceiling_s`. It runs
while at least one page is open, and stops with the last.

A page's stream first sends the newest turns it may see (so a reconnect
starts from a true picture), then, for each batch, each turn it touched,
re-rendered: a turn already on the page replaces itself (``hx-swap-oob``), a new
one goes on top. A turn folded from its entries is shared by every page (one
read per turn per batch, not one per page). A turn resumed after an approval is
one of the turns a batch touches, so it streams like a new one.

The page takes a filter (:class:`LiveFilter`: a session, a channel, a status),
which its stream keeps to. ``?paused=1`` shows the same turns without a stream
(the page stands still until "Resume"); ``?before=SEQ`` shows the turns older
than the one whose ``turn.started`` is entry ``SEQ`` (a keyset: the "Older" link
of the page before), also without a stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from overt.errors import LedgerClosed, OvertError
from overt.ledger.base import Entry, Ledger
from overt.ledger.notify import Backoff
from overt.ledger.reads import web
from overt.sessions.access import SessionAccess
from overt.sessions.turns_table import Cursor, list_turns
from overt.web.auth import Login
from overt.web.render import fragment, page, unknown_query
from overt.web.turns import TurnView, fold
from overt.web.viewer import Viewer

log = logging.getLogger("overt.web.live")

RECENT_TURNS = 40
BATCH = 1000
KEEPALIVE_S = 15.0
STREAM_LIFETIME_S = 900.0
CACHE = 2048
BACKLOG = 256
"""Batches a page may fall behind by before it is reset instead."""
SCAN = 2000
"""Turns a page reads at most to fill itself: a status filter that few turns match
shows what it found in the newest ``SCAN`` and an "Older turns" link from there,
rather than fold the whole ledger's turns."""
LIVE_QUERY = ("session", "channel", "status", "paused", "before")
STATUSES = {"running": "running or waiting for approval", "ok": "completed",
            "bad": "failed", "held": "held or denied on the way"}
"""The status filter's values: a turn's tone (the worst thing in it so far), with
what each means; ``running`` also takes a turn waiting for an approval."""


@dataclass(frozen=True, slots=True)
class LiveFilter:
    """Which turns a Live page shows: of one session, one channel, one status (each
    ``""``: any)."""

    session: str = ""
    channel: str = ""
    status: str = ""

    @classmethod
    def read(cls, request: Request) -> tuple[LiveFilter, list[str]]:
        """The filter in ``request``'s query, and what is wrong with it (unknown
        parameters, an unknown status: the page then shows the form, kept, and why)."""
        q = request.query_params
        chosen = cls(q.get("session", "").strip(), q.get("channel", "").strip(),
                     q.get("status", "").strip())
        problems = [p for p in [unknown_query(request, LIVE_QUERY)] if p]
        if chosen.status and chosen.status not in STATUSES:
            problems.append(f"status: {chosen.status!r} is not one of {', '.join(STATUSES)}")
        if any("\x00" in v for v in (chosen.session, chosen.channel)):
            problems.append("a filter holds a NUL character")
        return chosen, problems

    @property
    def any(self) -> bool:
        return bool(self.session or self.channel or self.status)

    def query(self, **more: str | int) -> str:
        """The filter (and ``more``) as a query string, ``""`` when empty."""
        pairs = {"session": self.session, "channel": self.channel, "status": self.status,
                 **{k: str(v) for k, v in more.items()}}
        given = {k: v for k, v in pairs.items() if v}
        return "?" + urlencode(given) if given else ""

    def admits(self, view: TurnView) -> bool:
        if self.session and view.session_id != self.session:
            return False
        if self.channel and view.source != self.channel:
            return False
        return not self.status or view.tone == self.status or (
            self.status == "running" and view.status == "awaiting_approval")


EVERY = LiveFilter()


def sse_event(event: str, data: str) -> str:
    """One SSE event; each line of ``data`` its own ``data:`` field."""
    lines = "\n".join(f"data: {line}" for line in data.splitlines() or [""])
    return f"event: {event}\n{lines}\n\n"


def _hand(queue: asyncio.Queue[list[Entry]], batch: list[Entry]) -> None:
    """Queue ``batch`` for a page; a page too far behind (its connection stalled) is
    handed one empty batch instead of all it missed: it then starts again from what
    is recorded (a reset), as on a reconnect."""
    try:
        queue.put_nowait(batch)
    except asyncio.QueueFull:
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait([])


class LiveHub:
    """Follows the ledger for the open pages of one server (see the module docstring)."""

    def __init__(self, ledger: Ledger, access: Callable[[], SessionAccess], *,
                 ceiling_s: float = 0.5) -> None:
        self.ledger, self.access, self.ceiling_s = ledger, access, ceiling_s
        self._queues: set[asyncio.Queue[list[Entry]]] = set()
        self._task: asyncio.Task[None] | None = None
        self._views: OrderedDict[str, asyncio.Future[TurnView | None]] = OrderedDict()
        self._owners: dict[str, str | None] = {}
        self._bodies: OrderedDict[str, str | None] = OrderedDict()

    @property
    def listeners(self) -> int:
        return len(self._queues)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[list[Entry]]]:
        """A queue of the entry batches appended from now on, while the block runs."""
        queue: asyncio.Queue[list[Entry]] = asyncio.Queue(BACKLOG)
        self._queues.add(queue)
        if self._task is None or self._task.done():
            start = await self.head()
            self._task = asyncio.get_running_loop().create_task(self._follow(start))
        try:
            yield queue
        finally:
            self._queues.discard(queue)
            if not self._queues and self._task is not None:
                self._task.cancel()
                self._task = None
                self._views.clear()

    async def head(self) -> int:
        """The seq of the newest entry (0: none).

        Raises:
            UsageError: the ledger offers no reads of its tables (the cockpit needs
                the SQLite or PostgreSQL ledger).
        """
        return await web.head(self.ledger)

    async def after(self, seq: int, limit: int = BATCH) -> list[Entry]:
        """The entries appended past ``seq``, oldest first (at most ``limit``).

        Raises:
            UsageError: as :meth:`head`.
        """
        return await web.entries_after(self.ledger, seq, limit)

    async def _follow(self, last: int) -> None:
        wait = Backoff(floor_s=0.05, ceiling_s=self.ceiling_s)
        while True:
            seen = self.ledger.appended.seq
            try:
                batch = await self.after(last)
            except LedgerClosed:  # the server is shutting down: nothing more to follow
                log.info("the live feed stopped: the ledger was closed")
                return
            except OvertError as exc:  # recorded in the log, and tried again
                log.error("the live feed could not read the ledger: %s", exc)
                batch = []
            if batch:
                last = batch[-1].seq
                wait.reset()
                for turn_id in {e.turn_id for e in batch if e.turn_id}:
                    self._views.pop(turn_id, None)
                for queue in self._queues:
                    _hand(queue, batch)
                continue
            await self.ledger.appended.wait(seen, wait.next())

    # -- shared reads ---------------------------------------------------------

    async def turn(self, turn_id: str) -> TurnView | None:
        """The turn folded from its entries (shared by every page until it changes,
        while the hub follows the ledger)."""
        if self._task is None:  # nobody follows the ledger: nothing would say it changed
            return await self._fold(turn_id)
        found = self._views.get(turn_id)
        if found is None:
            found = asyncio.ensure_future(self._fold(turn_id))
            self._views[turn_id] = found
            while len(self._views) > CACHE:
                self._views.popitem(last=False)
        return await asyncio.shield(found)

    async def _fold(self, turn_id: str) -> TurnView | None:
        return fold(await self.ledger.entries(turn_id=turn_id))

    async def owner(self, session_id: str | None) -> str | None:
        """Who started ``session_id`` (it never changes, so it is kept)."""
        if session_id is None:
            return None
        if session_id not in self._owners:
            self._owners[session_id] = await self.access().owner_of(session_id)
        return self._owners[session_id]

    async def body(self, digest: str | None, seq: int | None = None) -> str | None:
        if not digest:
            return None
        if digest not in self._bodies:
            self._bodies[digest] = await self.ledger.content(digest, seq=seq)
            while len(self._bodies) > CACHE:
                self._bodies.popitem(last=False)
        return self._bodies[digest]

    async def visible(self, viewer: Viewer, view: TurnView | None) -> bool:
        return view is not None and viewer.sees_session(await self.owner(view.session_id))

    async def recent(self, viewer: Viewer, chosen: LiveFilter = EVERY, *,
                     before: int | None = None, limit: int = RECENT_TURNS
                     ) -> tuple[list[TurnView], int | None]:
        """The newest turns ``viewer`` may see that ``chosen`` admits, newest first,
        started before entry ``before`` (``None``: the newest); and the cursor of the
        page after (the ``turn.started`` seq of the last turn shown, or of the last
        read when :data:`SCAN` turns were read; ``None``: no older turn). Read by
        keyset on the ledger's turns, never by offset."""
        readable = await self.access().readable(viewer.actor)
        sessions = readable
        if chosen.session:
            sessions = (frozenset({chosen.session}) if readable is None
                        else readable & {chosen.session})
        found: list[tuple[int, TurnView]] = []
        cursor, scanned, step = before, 0, BATCH if chosen.status else limit + 1
        while len(found) <= limit and scanned < SCAN:
            asked = min(step, SCAN - scanned)
            rows = await list_turns(self.ledger, order="newest",
                                    after=None if cursor is None else Cursor(0.0, cursor),
                                    source=chosen.channel or None, sessions=sessions,
                                    limit=asked)
            for row in rows:
                cursor, scanned = row.seq, scanned + 1
                view = await self.turn(row.turn_id)
                if view is not None and chosen.admits(view) and await self.visible(viewer,
                                                                                    view):
                    found.append((row.seq, view))
                    if len(found) > limit:
                        break
            if len(rows) < asked:
                cursor = None  # the oldest turn was read
                break
        if len(found) > limit:
            older: int | None = found[limit - 1][0]
        else:  # fewer than a page: older ones only if the scan stopped short
            older = cursor if scanned >= SCAN else None
        return [v for _, v in found[:limit]], older

    async def render(self, view: TurnView, viewer: Viewer, *, oob: bool = False) -> str:
        """One turn's article for ``viewer`` (bodies only when it may read content)."""
        message = reply = problem = None
        if viewer.reads_content:
            message = await self.body(view.message_digest)
            reply = await self.body(view.reply_digest, view.last_seq)
            problem = await self.body(view.error_digest, view.last_seq)
        return fragment("_turn.html", turn=view, message=message, reply=reply, oob=oob,
                        viewer=viewer, problem=problem)


async def live_page(hub: LiveHub, request: Request, viewer: Viewer, login: Login) -> Response:
    chosen, problems = LiveFilter.read(request)
    raw_before = request.query_params.get("before", "").strip()
    before: int | None = None
    if raw_before:
        try:
            before = int(raw_before)
        except ValueError:
            problems.append(f"before: {raw_before!r} is not an entry number; "
                            "start again from the newest turns")
    if before is not None and not 0 < before < 2**63:
        problems.append(f"before: {before} is not an entry number; "
                        "start again from the newest turns")
    views: list[TurnView] = []
    older = None
    if not problems:
        views, older = await hub.recent(viewer, chosen, before=before)
    paused = before is not None or request.query_params.get("paused", "") not in ("", "0")
    turns = [await hub.render(v, viewer) for v in views]
    return page("live.html", viewer, login, active="live", turns=turns, chosen=chosen,
                statuses=STATUSES, problems=problems, paused=paused, history=before is not None,
                older=older, status=422 if problems else 200)


async def live_stream(hub: LiveHub, request: Request, viewer: Viewer,
                      login: Login) -> Response:
    chosen, problems = LiveFilter.read(request)
    if problems:
        return Response("; ".join(problems), status_code=422, media_type="text/plain")
    return StreamingResponse(_turn_events(hub, viewer, chosen),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def _turn_events(hub: LiveHub, viewer: Viewer,
                       chosen: LiveFilter = EVERY) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    yield "retry: 1000\n\n"
    async with hub.subscribe() as queue:
        known: set[str] = set()
        reset = True
        while loop.time() - started < STREAM_LIFETIME_S:
            if reset:  # the start, or a page that fell behind: what is recorded now
                shown, _older = await hub.recent(viewer, chosen)
                known = {v.turn_id for v in shown}
                articles = "".join([await hub.render(v, viewer) for v in shown])
                yield sse_event("turns",
                                f'<div id="turns" hx-swap-oob="innerHTML">{articles}</div>')
                reset = False
            try:
                batch = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            while batch and not queue.empty():
                more = queue.get_nowait()
                batch = batch + more if more else []
            if not batch:
                reset = True
                continue
            parts = []
            for turn_id in dict.fromkeys(e.turn_id for e in batch if e.turn_id):
                view = await hub.turn(turn_id)
                if view is None or not await hub.visible(viewer, view):
                    continue
                if turn_id in known:  # on the page: it changes there, even if now filtered out
                    parts.append(await hub.render(view, viewer, oob=True))
                elif chosen.admits(view):
                    known.add(turn_id)
                    parts.append(f'<div hx-swap-oob="afterbegin:#turns">'
                                 f'{await hub.render(view, viewer)}</div>')
            if parts:
                yield sse_event("turns", "".join(parts))
