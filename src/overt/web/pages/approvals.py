"""The Approvals page: the calls the gate held, and deciding them.

Listed as the API lists them (``approvals.read``; the requests of sessions the
viewer may reach): the tool, the rule that held it and why, the time left, the
arguments for a viewer that may read content. Approving or denying (a form
with a reason, ``approvals.decide``, CSRF-checked) goes through the runtime as
``POST /v1/approvals/{id}/approve`` does, except that the page answers as soon as
the decision is recorded: the paused turn answers in the background and streams
into the Live page as any turn does. Each card says who asked and (for
``trail.read``) the message that led to the call; a viewer without
``approvals.decide`` is told why it has no buttons. The list is pushed again
over SSE whenever an approval is requested or decided, here or in any process,
so a decision taken elsewhere shows at once (a reason being typed survives the
list being pushed again: ``hx-preserve``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from overt.errors import ApprovalError, LedgerIntegrityError, NotFoundError
from overt.events import PolicyDecided, TurnStarted
from overt.policy.approvals import ApprovalRequest
from overt.runtime import Runtime
from overt.sessions.access import SessionAccess
from overt.web.auth import Login
from overt.web.live import KEEPALIVE_S, STREAM_LIFETIME_S, LiveHub, sse_event
from overt.web.render import fragment, page
from overt.web.viewer import APPROVALS_DECIDE, APPROVALS_READ, Viewer

KINDS = ("approval.requested", "approval.decided", "turn.resumed")
RECENT_DECIDED = 10
MAX_REASON = 2000
DECISIONS = ("approve", "deny")
FIELDS = frozenset({"csrf", "reason"})
CHANGED = "(the message's stored body does not match its digest: run overt ledger verify)"
TAMPERED = ("(the stored arguments do not match the digest the request recorded: the "
            "record was changed; run overt ledger verify)")


@dataclass(frozen=True, slots=True)
class Held:
    """One request as the page shows it."""

    request: ApprovalRequest
    rule: str
    message: str
    arguments: str | None
    left: str
    asker: str
    """Who asked: the actor whose message started the turn (the session's owner
    for its first turn), else the request's actor."""
    asked: str | None = None
    """The message that led to the call (``trail.read`` only; ``None``: hidden,
    pruned, or held outside a turn)."""


def time_left(expires_at: str, now: datetime | None = None) -> str:
    """``12m`` / ``3h 05m`` / ``expired``: how long a request still waits."""
    try:
        end = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return expires_at
    seconds = int((end - (now or datetime.now(UTC))).total_seconds())
    if seconds <= 0:
        return "expired"
    if seconds < 60:
        return "under a minute"
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m"


class Approvals:
    def __init__(self, runtime: Runtime, hub: LiveHub) -> None:
        self.runtime, self.hub = runtime, hub

    @property
    def access(self) -> SessionAccess:
        return SessionAccess(self.runtime.ledger, self.runtime.gate.capabilities)

    async def held(self, viewer: Viewer) -> tuple[list[Held], list[ApprovalRequest]]:
        """The pending requests ``viewer`` may see, and the newest decided ones."""
        requests = await self.access.visible_approvals(viewer.actor,
                                                       await self.runtime.approvals.list())
        pending = [r for r in requests if r.status == "pending"]
        decided = [r for r in requests if r.status != "pending"][-RECENT_DECIDED:][::-1]
        return [await self._held(r, viewer) for r in pending], decided

    async def _held(self, r: ApprovalRequest, viewer: Viewer) -> Held:
        rule, message, asker, asked = r.reason_code, "", r.actor, None
        if r.turn_id:
            for e in await self.runtime.ledger.entries(
                    turn_id=r.turn_id, kinds=[PolicyDecided.kind, TurnStarted.kind]):
                if e.kind == TurnStarted.kind:
                    started = e.event(TurnStarted)
                    asker = started.actor or asker
                    if viewer.reads_content:
                        try:
                            asked = await self.runtime.ledger.content(
                                started.message_digest, seq=e.seq)
                        except LedgerIntegrityError:
                            asked = CHANGED
                    continue
                decided = e.event(PolicyDecided)
                if decided.decision_id == r.decision_id:
                    rule, message = decided.rule, decided.message
        arguments = None
        if viewer.reads_content:
            try:
                body = await self.runtime.ledger.content(r.args_sha256, seq=r.requested_seq)
            except LedgerIntegrityError:  # never shown as what the call would run
                arguments = TAMPERED
            else:
                arguments = _pretty(body) if body is not None else "(arguments pruned)"
        return Held(r, rule, message, arguments, time_left(r.expires_at), asker, asked)

    async def list_html(self, viewer: Viewer, csrf: str) -> str:
        pending, decided = await self.held(viewer)
        return fragment("_approvals.html", pending=pending, decided=decided, viewer=viewer,
                        csrf=csrf, decides=viewer.may(APPROVALS_DECIDE))

    async def page(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(APPROVALS_READ):
            return page("denied.html", viewer, login, active="approvals", status=403,
                        capability=APPROVALS_READ)
        return page("approvals.html", viewer, login, active="approvals",
                    listing=await self.list_html(viewer, login.csrf),
                    notice=request.query_params.get("notice", ""))

    async def stream(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(APPROVALS_READ):
            return Response("approvals.read is needed", status_code=403)
        return StreamingResponse(self._events(viewer, login.csrf),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    async def _events(self, viewer: Viewer, csrf: str) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        yield "retry: 1000\n\n"
        async with self.hub.subscribe() as queue:
            last = await self.list_html(viewer, csrf)
            yield sse_event("approvals", last)
            while loop.time() - started < STREAM_LIFETIME_S:
                try:
                    batch = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    batch = []  # the time left moves on: look again
                if batch and not any(e.kind in KINDS for e in batch):
                    continue
                now = await self.list_html(viewer, csrf)
                if now != last:
                    last = now
                    yield sse_event("approvals", now)
                elif not batch:
                    yield ": keep-alive\n\n"

    async def decide(self, request: Request, viewer: Viewer, login: Login) -> Response:
        request_id = request.path_params["request_id"]
        decision = request.path_params["decision"]
        form = await request.form()
        reason = form.get("reason")
        # a decision read as another, or a reason cut short, is worse than a refusal
        problem = (f"no such decision {decision!r}: approve or deny"
                   if decision not in DECISIONS else _form_problem(form.keys(), reason))
        if problem:
            return page("denied.html", viewer, login, active="approvals", status=422,
                        capability=None, message=problem)
        approve = decision == "approve"
        text = reason.strip() if isinstance(reason, str) and reason.strip() else None
        try:
            await self.access.approval(viewer.actor, self.runtime.approvals, request_id,
                                       surface="web:POST /approvals/{id}")
            decided, _ = await self.runtime.decide_soon(
                request_id, "approved" if approve else "denied", by=viewer.actor, reason=text)
        except NotFoundError:
            return page("denied.html", viewer, login, active="approvals", status=404,
                        capability=None, message="no such approval request")
        except ApprovalError as exc:  # not this viewer's to decide (recorded), or decided
            status = 409 if viewer.may(APPROVALS_DECIDE) else 403
            return page("denied.html", viewer, login, active="approvals", status=status,
                        capability=None, message=str(exc))
        except LedgerIntegrityError as exc:  # the held call's record was changed: not run
            return page("denied.html", viewer, login, active="approvals", status=500,
                        capability=None, message=str(exc))
        said = {"approved": "approved: the turn goes on, and answers in Live",
                "denied": "denied: the turn answers without the call",
                "expired": "expired before the decision: the turn answers without the call",
                }.get(decided.status, decided.status)
        notice = quote(f"{request_id} {said}")
        return RedirectResponse(f"/approvals?notice={notice}", status_code=303)


def _form_problem(fields: Iterable[str], reason: object) -> str:
    """Why a decision form is refused, or ``""``: a field it does not know (a
    mistyped ``reason`` would be decided without its reason), a reason that is
    not text, or one over ``MAX_REASON`` characters (not cut short)."""
    unknown = sorted(set(fields) - FIELDS)
    if unknown:
        return f"unknown form field {', '.join(unknown)}: the form takes a reason"
    if reason is not None and not isinstance(reason, str):
        return "the reason must be text"
    if isinstance(reason, str) and len(reason.strip()) > MAX_REASON:
        return f"the reason is over {MAX_REASON} characters ({len(reason.strip())})"
    return ""


def _pretty(body: str) -> str:
    try:
        return json.dumps(json.loads(body), ensure_ascii=False, indent=2, sort_keys=True)
    except ValueError:
        return body
