"""Logging in to the cockpit, its cookie, CSRF on every POST, the security headers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from overt.channels.http import create_app
from overt.ledger.base import Ledger
from overt.models.fake import FunctionModel
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.runtime import Runtime
from overt.web import cockpit_routes
from overt.web.auth import COOKIE, Logins
from tests.conftest import run
from tests.web.conftest import GRANTS, OPERATOR, RULE, TOKENS, reply


def app(ledger: Ledger, logins: Logins | None = None) -> Any:
    runtime = Runtime(model=FunctionModel(reply), ledger=ledger,
                      gate=Gate(Policy([RULE]), Capabilities(GRANTS)))
    return create_app(runtime, TOKENS, close_on_shutdown=False,
                      extra_routes=cockpit_routes(runtime, TOKENS, logins=logins))


def client(ledger: Ledger, base: str = "http://cockpit", **kw: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app(ledger, **kw)),
                             base_url=base)


async def log_in(c: httpx.AsyncClient, token: str = OPERATOR) -> httpx.Response:
    form = await c.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    return await c.post("/login", data={"token": token, "csrf": csrf.group(1)})


def page_csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def test_a_token_is_exchanged_for_an_http_only_strict_session_cookie(ledger: Ledger) -> None:
    async def main() -> httpx.Response:
        async with client(ledger) as c:
            return await log_in(c)
    done = run(main())
    assert done.status_code == 303 and done.headers["location"] == "/live"
    cookie = next(v for k, v in done.headers.multi_items()
                  if k == "set-cookie" and v.startswith(COOKIE))
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert "secure" not in cookie.lower()


def test_the_cookie_is_secure_when_served_over_tls(ledger: Ledger) -> None:
    async def main() -> httpx.Response:
        async with client(ledger, base="https://cockpit") as c:
            return await log_in(c)
    cookie = next(v for k, v in run(main()).headers.multi_items()
                  if k == "set-cookie" and v.startswith(COOKIE))
    assert "; secure" in cookie.lower()


def test_a_wrong_token_is_refused_and_logs_nobody_in(ledger: Ledger) -> None:
    async def main() -> tuple[int, int]:
        async with client(ledger) as c:
            refused = await log_in(c, "ovt_wrong")
            after = await c.get("/live")
            return refused.status_code, after.status_code
    assert run(main()) == (401, 303)


def test_a_login_post_without_its_csrf_token_is_refused(ledger: Ledger) -> None:
    async def main() -> int:
        async with client(ledger) as c:
            return (await c.post("/login", data={"token": OPERATOR})).status_code
    assert run(main()) == 403


@pytest.mark.slow
def test_every_page_carries_a_csp_without_inline_script_and_the_other_headers(
        ledger: Ledger) -> None:
    async def main() -> list[httpx.Response]:
        async with client(ledger) as c:
            await log_in(c)
            return [await c.get(p) for p in ("/login", "/live", "/approvals", "/sessions",
                                             "/usage", "/memory", "/ledger")]
    for r in run(main()):
        assert r.status_code == 200, r.url
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
        assert "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert "<script>" not in r.text  # only <script src=...>, never inline


def test_a_post_without_the_session_csrf_token_is_refused_and_changes_nothing(
        ledger: Ledger) -> None:
    async def main() -> tuple[int, int, int]:
        async with client(ledger) as c:
            await log_in(c)
            forged = await c.post("/logout")
            still = await c.get("/live")
            ok = await c.post("/logout", data={"csrf": page_csrf(still.text)})
            return forged.status_code, still.status_code, ok.status_code
    assert run(main()) == (403, 200, 303)


def test_after_logout_the_cookie_no_longer_opens_a_page(ledger: Ledger) -> None:
    async def main() -> tuple[int, str]:
        async with client(ledger) as c:
            await log_in(c)
            session = c.cookies[COOKIE]
            live = await c.get("/live")
            await c.post("/logout", data={"csrf": page_csrf(live.text)})
            c.cookies.set(COOKIE, session)
            again = await c.get("/live")
            return again.status_code, again.headers["location"]
    assert run(main()) == (303, "/login")


def test_a_login_expires(ledger: Ledger) -> None:
    now = [0.0]
    logins = Logins(TOKENS, ttl_s=60, clock=lambda: now[0])

    async def main() -> tuple[int, int]:
        async with client(ledger, logins=logins) as c:
            await log_in(c)
            before = (await c.get("/live")).status_code
            now[0] = 61.0
            return before, (await c.get("/live")).status_code
    assert run(main()) == (200, 303)


def test_an_event_stream_without_a_login_is_401_not_a_redirect(ledger: Ledger) -> None:
    async def main() -> int:
        async with client(ledger) as c:
            r = await c.get("/live/stream", headers={"Accept": "text/event-stream"})
            return r.status_code
    assert run(main()) == 401


def test_static_assets_are_served_from_the_package(ledger: Ledger, tmp_path: Path) -> None:
    async def main() -> list[int]:
        async with client(ledger) as c:
            return [(await c.get(f"/static/{name}")).status_code
                    for name in ("htmx.min.js", "htmx-ext-sse.js", "cockpit.css")]
    assert run(main()) == [200, 200, 200]
