"""The cockpit's routes, served by ``overt serve`` at ``/`` beside the API.

:func:`cockpit_routes` gives the Starlette routes; ``overt serve`` passes them
to :func:`overt.channels.http.create_app` as ``extra_routes``, so the API, its
tokens and its runtime are the same ones. Static assets (htmx, its SSE
extension, the stylesheet) come from the package: nothing is fetched from
elsewhere, and there is no build step.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from overt.channels.auth import Tokens
from overt.channels.http import API_PATHS
from overt.engine.budget import Budget
from overt.ledger.signing import PublicKey
from overt.runtime import Runtime
from overt.sessions.access import SessionAccess
from overt.web.auth import (
    COOKIE,
    Login,
    Logins,
    Page,
    clear_cookie,
    guard,
    over_tls,
    secured,
    set_cookie,
)
from overt.web.live import LiveHub, live_page, live_stream
from overt.web.pages.approvals import Approvals
from overt.web.pages.entry import EntryPage
from overt.web.pages.ledger import LedgerPage
from overt.web.pages.memory import MemoryPage
from overt.web.pages.sessions import Sessions
from overt.web.pages.turns import Turns
from overt.web.pages.usage import UsagePage
from overt.web.render import page
from overt.web.viewer import Viewer

STATIC = Path(__file__).parent / "static"
LOGIN_CSRF = "overt_login_csrf"


def cockpit_routes(runtime: Runtime, tokens: Tokens, *, budget: Budget | None = None,
                   secret: bytes | None = None, checkpoint_key: PublicKey | None = None,
                   logins: Logins | None = None) -> list[BaseRoute]:
    """The cockpit over ``runtime``, its logins checked against ``tokens``.

    ``budget``: the limits the Usage page shows what is left of (the config's).
    ``secret``: the key login cookies are signed with, shared by every worker
    (:func:`overt.web.cookie.load_secret`); ``None``: one for this process only.
    ``checkpoint_key``: the public key the Ledger page checks the newest signed
    checkpoint's signature with (none: shown unchecked).
    ``logins``: the logins, made by the caller (a test's, with its own clock).
    """
    logins = logins or Logins(tokens, secret)

    def access() -> SessionAccess:
        return SessionAccess(runtime.ledger, runtime.gate.capabilities)

    hub = LiveHub(runtime.ledger, access)
    approvals = Approvals(runtime, hub)
    sessions = Sessions(runtime)
    usage = UsagePage(runtime, budget)
    memory = MemoryPage(runtime)
    ledger = LedgerPage(runtime, checkpoint_key)
    turns = Turns(runtime, checkpoint_key)
    entry = EntryPage(runtime)

    def on(path: str, handler: Page, *, post: bool = False) -> Route:
        return Route(path, guard(logins, lambda: runtime.gate.capabilities, handler,
                                 post=post), methods=["POST"] if post else ["GET"])

    async def live(request: Request, viewer: Viewer, login: Login) -> Response:
        return await live_page(hub, request, viewer, login)

    async def stream(request: Request, viewer: Viewer, login: Login) -> Response:
        return await live_stream(hub, request, viewer, login)

    async def root(request: Request, viewer: Viewer, login: Login) -> Response:
        return RedirectResponse("/live", status_code=303)

    async def nowhere(request: Request, viewer: Viewer, login: Login) -> Response:
        return page("denied.html", viewer, login, status=404, heading="No such page", capability="",
                    message=f"There is no page at {request.url.path}. The navigation above "
                            "lists the pages you may open; a link to a session, turn or "
                            "node that a prune removed, or one mistyped, ends here.")

    guarded_nowhere = guard(logins, lambda: runtime.gate.capabilities, nowhere)

    async def unknown(request: Request) -> Response:
        """Any other address: the API's own 404 under its paths, else the cockpit's page
        (in its layout, with the navigation), after the login."""
        if request.url.path.startswith(API_PATHS):
            raise HTTPException(404)
        return await guarded_nowhere(request)

    async def logout(request: Request, viewer: Viewer, login: Login) -> Response:
        logins.log_out(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        clear_cookie(response, request)
        return response

    async def login_form(request: Request) -> Response:
        return _login_page(request)

    async def login_post(request: Request) -> Response:
        form = await request.form()
        given, expected = form.get("csrf"), request.cookies.get(LOGIN_CSRF)
        if not (isinstance(given, str) and expected
                and hmac.compare_digest(given.encode(), expected.encode())):
            return secured(Response("missing or wrong CSRF token", status_code=403,
                                    media_type="text/plain"))
        token = form.get("token")
        made = logins.log_in(token) if isinstance(token, str) else None
        if made is None:
            return _login_page(request, error="That token is not one this server knows.",
                               status=401)
        session, _login = made
        response = RedirectResponse("/live", status_code=303)
        set_cookie(response, request, session, logins.ttl_s)
        response.delete_cookie(LOGIN_CSRF, path="/login")
        return secured(response)

    return [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login_post, methods=["POST"]),
        on("/", root),
        on("/logout", logout, post=True),
        on("/live", live),
        on("/live/stream", stream),
        on("/approvals", approvals.page),
        on("/approvals/stream", approvals.stream),
        on("/approvals/{request_id}/{decision:str}", approvals.decide, post=True),
        on("/sessions", sessions.listing),
        # session ids may hold a slash (an email Message-ID): the export is matched first
        on("/sessions/{session_id:path}/export.md", sessions.export),
        on("/sessions/{session_id:path}", sessions.session),
        on("/turns", turns.table),
        on("/turns/{turn_id}/proof.json", turns.proof),
        on("/turns/{turn_id}", turns.turn),
        on("/usage", usage.page),
        on("/memory", memory.search),
        on("/memory/{node_id}", memory.node),
        on("/ledger", ledger.page),
        on("/ledger/verify", ledger.start, post=True),
        on("/ledger/verify/status", ledger.status),
        on("/ledger/entries/{seq}", entry.entry),
        Mount("/static", StaticFiles(directory=STATIC), name="cockpit-static"),
        Route("/{path:path}", unknown, methods=["GET"]),  # last: every other address
    ]


def _login_page(request: Request, *, error: str = "", status: int = 200) -> Response:
    """The login form, with a fresh CSRF token in a cookie and in the form (double submit)."""
    token = secrets.token_urlsafe(32)
    response = page("login.html", None, None, error=error, status=status, login_csrf=token)
    response.set_cookie(LOGIN_CSRF, token, path="/login", httponly=True, samesite="strict",
                        secure=over_tls(request))
    return secured(response)
