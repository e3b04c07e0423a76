"""The Sessions pages: the table (paged, searchable) and one session read as a
conversation.

The table (:mod:`overt.sessions.sessions_table`) lists each session with its
channel, owner, turns, tool calls, time, cost and failures, a page at a time by
keyset (``?after=``), newest, oldest or errors first. A search by text (or by
"started before") goes to the database instead (:func:`overt.sessions.list_sessions`):
the most recently active sessions that match, at most :data:`LISTED`, and the page
says when more matched. Only sessions the viewer may reach are listed (its own, or
every one with ``sessions.read_any``), and only a viewer that may read bodies
searches by text: for another, a match would tell what a message says. A session is
titled by its first message for a viewer that may read it, else by its channel and
time. A filter the page cannot read keeps the form and says what to fix (422).

A session reads as its messages with the reasoning between them: each turn's
question, then its records in ledger order (reasoning steps, held or denied
decisions with the rule that fired, approvals, tool calls linked to their row on
the turn's page), then its answer as Markdown. Each thing is said once: the
engine's step quoting a call's result is the call's line, and the rule that let a
call run is on that call. Each turn's badge says the worst thing that happened in
it (:func:`overt.web.timeline.trail_verdict`) and links its permalink
(``/turns/{id}``), where its arguments, results and requests are shown. Step labels
follow ``overt export`` (``[思考]`` … or ``[thinking]`` …, ``?labels=ja|en``), and
the page links the same Markdown ``overt export SESSION --labels …`` writes. Bodies
are shown only to a viewer that may read content (:mod:`overt.web.viewer`); the
export is content, so it needs that right too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from overt.clock import period_start
from overt.errors import LedgerIntegrityError, NotFoundError, UsageError
from overt.reasoning.export import markdown
from overt.reasoning.parse import LABELS
from overt.reasoning.trail import (
    ApprovalRecord,
    DecisionRecord,
    Step,
    ToolCallRecord,
    TurnTrail,
    build_trail,
)
from overt.runtime import Runtime
from overt.sessions import list_sessions, session_history, session_info, title
from overt.sessions.access import NO_SESSION, SessionAccess
from overt.sessions.sessions_table import (
    SESSION_ORDERS,
    SessionRow,
    from_info,
    list_session_rows,
    summed,
)
from overt.types import Message
from overt.web.auth import Login
from overt.web.render import page, unknown_query
from overt.web.timeline import trail_verdict
from overt.web.viewer import Viewer

LISTED = 200
"""Sessions a search lists at most (the most recently active; the page says when
more matched)."""
LISTING_QUERY = ("channel", "owner", "since", "until", "q", "order", "after")
"""The query parameters the sessions list takes."""
PAGE = 50
"""Sessions a page of the table holds (the next page is read by keyset)."""


def answer(messages: tuple[Message, ...]) -> str | None:
    """A turn's answer: its last assistant message without tool calls (the calls'
    arguments and results are on the turn's page, not repeated here)."""
    found = None
    for m in messages:
        if m.role == "assistant" and not m.tool_calls:
            found = m.content
    return found


class Sessions:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def access(self) -> SessionAccess:
        return SessionAccess(self.runtime.ledger, self.runtime.gate.capabilities)

    async def listing(self, request: Request, viewer: Viewer, login: Login) -> Response:
        q = request.query_params
        channel, owner = q.get("channel", "").strip(), q.get("owner", "").strip()
        since, until, text = q.get("since", "").strip(), q.get("until", "").strip(), \
            q.get("q", "").strip()
        order, after = q.get("order", "newest").strip(), q.get("after", "").strip()
        # a time it cannot read was compared as text: 'yesterday' or '24h' matched
        # nothing, and the page said no session matched
        problems = [p for p in [unknown_query(request, LISTING_QUERY)] if p]
        since_at = until_at = cursor = None
        try:
            since_at = period_start(since) if since else None
        except UsageError as exc:
            problems.append(f"Active since: {exc}")
        try:
            until_at = period_start(until) if until else None
        except UsageError as exc:
            problems.append(f"Started before: {exc}")
        if order not in SESSION_ORDERS:
            problems.append(f"order: {order!r} is not one of {', '.join(SESSION_ORDERS)}")
        if after and not (after.isascii() and after.isdigit() and len(after) <= 18):
            problems.append(f"page cursor {after!r} is not one this page wrote; start again "
                            "from the first page")
        elif after:
            cursor = int(after)
        # a match or its absence says something of a body: no text search without
        # the right to read bodies
        searched = text if viewer.reads_content else ""
        rows: list[tuple[SessionRow, str | None]] = []
        cut = False
        following: int | None = None
        if not problems and (viewer.reads_any or owner in ("", viewer.name)):
            whose = (owner or None) if viewer.reads_any else viewer.name
            if searched or until_at:  # a search: the most recently active that match
                found = await list_sessions(
                    self.runtime.ledger, owner=whose, source=channel or None,
                    since=since_at, until=until_at, text=searched or None, limit=LISTED + 1)
                cut = len(found) > LISTED
                listed = await summed(self.runtime.ledger, [from_info(i) for i in found[:LISTED]])
            else:  # the table: a page at a time, by keyset
                paged = await list_session_rows(
                    self.runtime.ledger, order=order, after=cursor,  # type: ignore[arg-type]
                    source=channel or None, owner=whose, since=since_at, limit=PAGE + 1)
                listed = paged[:PAGE]
                following = listed[-1].key if len(paged) > PAGE else None
            for row in listed:
                name = await title(self.runtime.ledger, row.info) \
                    if viewer.reads_content else None
                rows.append((row, name))
        return page("sessions.html", viewer, login, active="sessions", rows=rows,
                    channel=channel, owner=owner, since=since, until=until, text=searched,
                    ignored=bool(text) and not searched, cut=cut, listed=LISTED,
                    problems=problems, order=order, orders=SESSION_ORDERS,
                    since_bad=any(p.startswith("Active since") for p in problems),
                    following=following, first_page=cursor is None,
                    status=422 if problems else 200)

    async def _trail(self, request: Request, viewer: Viewer) -> tuple[str, Any]:
        session_id = request.path_params["session_id"]
        await self.access.session(viewer.actor, session_id, surface="web:GET /sessions/{id}")
        trail = await build_trail(self.runtime.ledger, session_id=session_id)
        if not trail.turns:
            raise NotFoundError(NO_SESSION)
        return session_id, trail

    async def session(self, request: Request, viewer: Viewer, login: Login) -> Response:
        labels, problem = _labels(request)
        if problem:
            return page("denied.html", viewer, login, active="sessions", status=422,
                        capability=None, message=problem)
        try:
            session_id, trail = await self._trail(request, viewer)
        except NotFoundError:
            return page("denied.html", viewer, login, active="sessions", status=404,
                        capability=None, message=NO_SESSION)
        history: dict[str, str | None] = {}
        if viewer.reads_content:
            try:
                for turn in await session_history(self.runtime.ledger, session_id):
                    history[turn.turn_id] = answer(turn.messages)
            except LedgerIntegrityError as exc:  # a body changed behind the ledger's back
                return page("denied.html", viewer, login, active="sessions", status=500,
                            capability=None, message=str(exc))
        turns = [_turn(t, history.get(t.turn_id)) for t in trail.turns]
        info = await session_info(self.runtime.ledger, session_id)
        name = await title(self.runtime.ledger, info, width=90) \
            if viewer.reads_content and info is not None else ""
        return page("session.html", viewer, login, active="sessions", session_id=session_id,
                    turns=turns, labels=labels, names=LABELS[labels], info=info,
                    name=name, content=viewer.reads_content)

    async def export(self, request: Request, viewer: Viewer, login: Login) -> Response:
        """The Markdown ``overt export SESSION --labels L`` writes."""
        if not viewer.reads_content:
            return PlainTextResponse("trail.read is needed to export content",
                                     status_code=403)
        labels, problem = _labels(request)
        if problem:
            return PlainTextResponse(problem, status_code=422)
        try:
            session_id, trail = await self._trail(request, viewer)
        except NotFoundError:
            return PlainTextResponse(NO_SESSION, status_code=404)
        name = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:100]
        return PlainTextResponse(
            markdown(trail, labels), media_type="text/markdown; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}.md"'})


def _labels(request: Request) -> tuple[str, str]:
    """The labels asked for, and why the query is refused (``""`` when it is not):
    ``labels=fr`` was shown in English as if it had been read."""
    if problem := unknown_query(request, ("labels",)):
        return "en", problem
    wanted = request.query_params.get("labels", "en")
    if wanted not in LABELS:
        return "en", f"unknown labels {wanted!r}: one of {', '.join(sorted(LABELS))}"
    return wanted, ""


@dataclass(slots=True)
class Shown:
    """One turn as the session page lays it out: its records once each (a step the
    engine wrote about a call, or about a decision, is said by that call's or that
    decision's line; a decision that let a call run is the call's rule), its badge."""

    trail: TurnTrail
    records: list[tuple[str, Any, str | None]]
    answer: str | None
    tone: str = "ok"
    verdict: str = ""


def _turn(turn: TurnTrail, answered: str | None) -> Shown:
    records: list[tuple[str, Any, str | None]] = []
    rules = {d.tool_call_id: d.rule for d in turn.decisions}
    for r in turn.records():
        if isinstance(r, Step):
            # the engine's line about a call's result is the call's line; its line about
            # a held call stays (the label says it in the chosen language), and the
            # decision beside it does not say the policy's message again
            if r.tool_call_id is None or r.policy_decision_id is not None:
                records.append(("step", r, None))
        elif isinstance(r, ToolCallRecord):
            records.append(("call", r, rules.get(r.tool_call_id)))
        elif isinstance(r, DecisionRecord):
            if r.effect != "allow":
                records.append(("decision", r, None))
        elif isinstance(r, ApprovalRecord):
            records.append(("approval", r, None))
    tone, verdict = trail_verdict(turn)
    return Shown(turn, records, answered, tone, verdict)
