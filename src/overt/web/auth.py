"""Logging in to the cockpit, its session cookie, CSRF and security headers.

An actor logs in with the bearer token the API accepts; the token is checked
against the same :class:`~overt.channels.auth.Tokens` and exchanged for a signed,
expiring cookie (:mod:`overt.web.cookie`) naming the actor, the login and the
token: nothing is kept by the process, so the login survives a restart and works
on every worker that shares the secret key, and the cookie is refused once its
token is removed. The cookie is ``HttpOnly``, ``SameSite=Strict``, ``Secure`` when the request
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

from overt.channels.auth import Tokens, token_digest
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.web.cookie import Claims, Signer
from overt.web.viewer import Viewer

COOKIE = "overt_cockpit"
SESSION_TTL_S = 12 * 3600.0

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
    """One logged-in browser: who, its CSRF token, until when (Unix seconds), and
    the nonce that names this login."""

    actor: Actor
    csrf: str
    expires: float
    nonce: str = ""


class Logins:
    """Logins carried by signed cookies (:mod:`overt.web.cookie`), checked against
    ``tokens`` on every request.

    ``secret``: the key cookies are signed with, the same for every worker (``overt
    serve`` reads it from a file, :func:`~overt.web.cookie.load_secret`); ``None``
    makes one for this process alone (a test's), so its logins end with it.

    A cookie is refused once its token is gone from ``tokens`` (a server restarted
    without it), on every worker. A logout refuses its cookie from then on in this
    process: the nonce is kept until the cookie would have expired anyway. Another
    worker learns of a logout only when the browser's cookie is cleared, which the
    logout response does; a copy of the cookie taken before would still open pages
    there until it expires (remove the token to end every login of an actor).
    """

    def __init__(self, tokens: Tokens, secret: bytes | None = None, *,
                 ttl_s: float = SESSION_TTL_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.tokens, self.ttl_s, self.clock = tokens, ttl_s, clock
        self.signer = Signer(secret if secret is not None else secrets.token_bytes(32))
        self._logged_out: dict[str, float] = {}

    def log_in(self, token: str) -> tuple[str, Login] | None:
        """A new cookie value for the actor ``token`` names; ``None`` for a wrong token."""
        actor = self.tokens.actor(token.strip()) if token.strip() else None
        if actor is None:
            return None
        tag = self.signer.token_tag(token_digest(token.strip()))
        value, claims = self.signer.sign(str(actor), int(self.clock() + self.ttl_s), tag)
        return value, self._login(actor, claims)

    def _login(self, actor: Actor, claims: Claims) -> Login:
        return Login(actor, self.signer.csrf(claims.nonce), float(claims.expires), claims.nonce)

    def find(self, value: str | None) -> Login | None:
        """The login ``value`` carries, or ``None``: malformed, tampered with, signed
        under another key, expired, logged out here, or its token no longer known."""
        now = self.clock()
        claims = self.signer.check(value, now)
        if claims is None or claims.nonce in self._logged_out:
            return None
        for digest, actor in self.tokens.as_dict().items():
            if actor == claims.actor and hmac.compare_digest(
                    self.signer.token_tag(digest), claims.token_tag):
                return self._login(Actor.parse(actor), claims)
        return None

    def log_out(self, value: str | None) -> None:
        """Refuse the login ``value`` carries from now on (in this process)."""
        now = self.clock()
        claims = self.signer.check(value, now)
        for nonce in [n for n, until in self._logged_out.items() if until <= now]:
            del self._logged_out[nonce]
        if claims is not None:
            self._logged_out[claims.nonce] = float(claims.expires)


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
    event stream or fragment gets 401), an address holding NUL a 400, and, for a POST,
    the CSRF check (403)."""
    async def endpoint(request: Request) -> Response:
        login = logins.find(request.cookies.get(COOKIE))
        if login is None:
            if request.method == "GET" and "text/event-stream" not in \
                    request.headers.get("accept", ""):
                return secured(RedirectResponse("/login", status_code=303))
            return secured(Response("log in first", status_code=401, media_type="text/plain"))
        if any("\x00" in value for value in (*request.path_params.values(),
                                               *request.query_params.keys(),
                                               *request.query_params.values())):
            # names nothing on the record; PostgreSQL would refuse the lookup (a 500)
            return secured(Response("the address holds a NUL character", status_code=400,
                                    media_type="text/plain"))
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
