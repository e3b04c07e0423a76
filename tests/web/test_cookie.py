"""Login cookies are signed and expiring: any worker on the same key accepts them,
nothing else does, and a logout or a removed token ends them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from overt.channels.auth import Tokens, token_digest
from overt.errors import ConfigError
from overt.web.auth import Logins
from overt.web.cookie import _b64, _unb64, load_secret
from tests.web.conftest import AUDITOR, OPERATOR, TOKENS


def logged_in(logins: Logins, token: str = OPERATOR) -> str:
    made = logins.log_in(token)
    assert made is not None
    return made[0]


def test_the_key_file_is_made_once_with_mode_0600_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "cockpit.key"
    first = load_secret(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) == 64
    assert load_secret(path) == first
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_a_key_file_other_users_may_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cockpit.key"
    load_secret(path)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="readable by other users"):
        load_secret(path)


def test_a_key_file_too_short_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cockpit.key"
    path.write_text("short\n")
    os.chmod(path, 0o600)
    with pytest.raises(ConfigError, match="too short"):
        load_secret(path)


def test_a_cookie_made_by_one_worker_is_accepted_by_another_on_the_same_key(
        tmp_path: Path) -> None:
    path = tmp_path / "cockpit.key"
    one, two = Logins(TOKENS, load_secret(path)), Logins(TOKENS, load_secret(path))
    cookie = logged_in(one)
    here, there = one.find(cookie), two.find(cookie)
    assert here is not None and there is not None
    assert str(there.actor) == "operator:alice" and there.csrf == here.csrf


def test_a_cookie_signed_under_another_key_is_refused() -> None:
    assert Logins(TOKENS).find(logged_in(Logins(TOKENS))) is None


def test_a_tampered_cookie_is_refused() -> None:
    logins = Logins(TOKENS)
    cookie = logged_in(logins, AUDITOR)
    version, actor, expires, nonce, tag, mac = cookie.split(".")
    assert _unb64(actor) == b"operator:auditor"
    forged = [
        ".".join((version, _b64(b"operator:alice"), expires, nonce, tag, mac)),
        ".".join((version, actor, str(int(expires) + 3600), nonce, tag, mac)),
        ".".join((version, actor, expires, nonce, tag, mac[:-2] + ("AA" if mac[-2:] != "AA"
                                                                   else "BB"))),
        # the last character's low bits are dropped by a decoder: still refused
        ".".join((version, actor, expires, nonce, tag, mac[:-1] + chr(ord(mac[-1]) ^ 1))),
        cookie + "x", cookie.replace("v1.", "v2.", 1), "", "not.a.cookie",
    ]
    assert [logins.find(f) for f in forged] == [None] * len(forged)
    assert logins.find(cookie) is not None


def test_an_expired_cookie_is_refused() -> None:
    now = [1_000_000.0]
    logins = Logins(TOKENS, ttl_s=60, clock=lambda: now[0])
    cookie = logged_in(logins)
    now[0] += 59
    assert logins.find(cookie) is not None
    now[0] += 1
    assert logins.find(cookie) is None


def test_a_logged_out_cookie_is_refused_and_others_still_open() -> None:
    logins = Logins(TOKENS)
    gone, kept = logged_in(logins), logged_in(logins)
    logins.log_out(gone)
    assert logins.find(gone) is None and logins.find(kept) is not None


def test_a_cookie_is_refused_once_its_token_is_removed(tmp_path: Path) -> None:
    secret = load_secret(tmp_path / "cockpit.key")
    cookie = logged_in(Logins(TOKENS, secret))
    without = Tokens({d: a for d, a in TOKENS.as_dict().items()
                      if d != token_digest(OPERATOR)} | {token_digest("ovt_new"): "operator:alice"})
    assert Logins(without, secret).find(cookie) is None
    assert Logins(TOKENS, secret).find(cookie) is not None
