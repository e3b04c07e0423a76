"""Logging in to the cockpit, its session cookie, CSRF and security headers.

An actor logs in with the bearer token the API accepts; the token is checked
against the same :class:`~overt.channels.auth.Tokens` and exchanged for a random
session id, held here in memory (one process: another ``overt serve`` worker
asks its operator to log in again) with the actor, a CSRF token and an expiry.
The cookie is ``HttpOnly``, ``SameSite=Strict``, ``Secure`` when the request
came over TLS, and ``Path=/``.

Every state-changing POST carries the session's CSRF token in a form field
(``csrf``) or the ``X-CSRF-Token`` header, compared in constant time; a POST
without it is refused with 403 before anything runs. Every cockpit response
carries a Content-Security-Policy that allows scripts from this origin only
(no inline script, no eval), and ``X-Content-Type-Options``,
``X-Frame-Options`` / ``frame-ancestors``, ``Referrer-Policy``.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from overt.channels.auth import Tokens
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.web.viewer import Viewer

COOKIE = "overt_cockpit"
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 10_000

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class Login:
    """One logged-in browser: who, its CSRF token, until when (monotonic seconds)."""

    actor: Actor
    csrf: str
    expires: float


class Logins:
    """Session ids of logged-in browsers (in this process's memory)."""

    def __init__(self, tokens: Tokens, *, ttl_s: float = SESSION_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tokens, self.ttl_s, self.clock = tokens, ttl_s, clock
        self._logins: dict[str, Login] = {}

    def log_in(self, token: str) -> tuple[str, Login] | None:
        """A new session for the actor ``token`` names; ``None`` for a wrong token."""
        actor = self.tokens.actor(token.strip()) if token.strip() else None
        if actor is None:
            return None
        self._drop_expired()
        session = secrets.token_urlsafe(32)
        login = Login(actor, secrets.token_urlsafe(32), self.clock() + self.ttl_s)
        self._logins[session] = login
        return session, login

    def find(self, session: str | None) -> Login | None:
        """The live login of ``session``, or ``None`` (unknown or expired)."""
        if not session:
            return None
        login = self._logins.get(session)
        if login is None:
            return None
        if login.expires <= self.clock():
            del self._logins[session]
            return None
        return login

    def log_out(self, session: str | None) -> None:
        if session:
            self._logins.pop(session, None)

    def _drop_expired(self) -> None:
        now = self.clock()
        for key in [k for k, v in self._logins.items() if v.expires <= now]:
            del self._logins[key]
        while len(self._logins) >= MAX_SESSIONS:  # the oldest go first
            del self._logins[next(iter(self._logins))]


def secured(response: Response) -> Response:
    """``response`` with the cockpit's security headers."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def over_tls(request: Request) -> bool:
    return request.url.scheme == "https"


def set_cookie(response: Response, request: Request, session: str, ttl_s: float) -> None:
    response.set_cookie(COOKIE, session, max_age=int(ttl_s), path="/", httponly=True,
                        samesite="strict", secure=over_tls(request))


def clear_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                           secure=over_tls(request))


def csrf_ok(login: Login, given: str | None) -> bool:
    """Whether ``given`` is the session's CSRF token (constant-time)."""
    return bool(given) and hmac.compare_digest(login.csrf.encode(), str(given).encode())


Page = Callable[[Request, Viewer, Login], Awaitable[Response]]


def guard(logins: Logins, capabilities: Callable[[], Capabilities], page: Page, *,
          post: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """``page`` behind the login (a browser without one goes to ``/login``; an
    event stream or fragment gets 401) and, for a POST, the CSRF check (403)."""
    async def endpoint(request: Request) -> Response:
        login = logins.find(request.cookies.get(COOKIE))
        if login is None:
            if request.method == "GET" and "text/event-stream" not in \
                    request.headers.get("accept", ""):
                return secured(RedirectResponse("/login", status_code=303))
            return secured(Response("log in first", status_code=401, media_type="text/plain"))
        if post:
            given = request.headers.get("x-csrf-token")
            if given is None:
                form = await request.form()
                value = form.get("csrf")
                given = value if isinstance(value, str) else None
            if not csrf_ok(login, given):
                return secured(Response("missing or wrong CSRF token", status_code=403,
                                        media_type="text/plain"))
        return secured(await page(request, Viewer(login.actor, capabilities()), login))
    return endpoint
