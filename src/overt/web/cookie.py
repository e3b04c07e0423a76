"""The cockpit's login cookie: a signed, expiring value any worker can check.

A login is not kept by the process that made it: the cookie carries it, signed
with HMAC-SHA256 under a secret key that every ``overt serve`` worker reads from
the same file (:func:`load_secret`), so a login survives a restart and is
accepted by every worker. The value is six fields joined by dots::

    v1.ACTOR.EXPIRES.NONCE.TOKEN_TAG.MAC

``ACTOR`` is the actor's name (base64url), ``EXPIRES`` the Unix time after which
the cookie is refused, ``NONCE`` 16 random bytes (base64url) naming this login,
``TOKEN_TAG`` a keyed digest of the token that was logged in with (so a cookie
is refused once its token is no longer in the tokens file), and ``MAC`` the
HMAC-SHA256 of everything before it, compared in constant time. A value that is
malformed, tampered with, signed under another key or expired is refused: the
browser logs in again.

The CSRF token of a login is derived from its nonce under the same key, so it is
bound to the login and the same on every worker.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from overt.errors import ConfigError

VERSION = "v1"
SECRET_BYTES = 32


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Claims:
    """What a cookie says: who, until when (Unix seconds), which login, which token."""

    actor: str
    expires: int
    nonce: str
    token_tag: str


class Signer:
    """Signs and checks cookie values, derives CSRF tokens, under one secret key."""

    def __init__(self, secret: bytes) -> None:
        """Raises:
            ConfigError: the key is shorter than 32 bytes.
        """
        if len(secret) < SECRET_BYTES:
            raise ConfigError(f"the cockpit's secret key must be at least {SECRET_BYTES} "
                              f"bytes, not {len(secret)}")
        self._key = secret

    def _mac(self, purpose: str, message: str) -> bytes:
        return hmac.new(self._key, f"{purpose}\n{message}".encode(), hashlib.sha256).digest()

    def token_tag(self, token_digest: str) -> str:
        """A keyed digest of a token's stored digest (not the digest itself: the
        cookie then says nothing that the tokens file says)."""
        return _b64(self._mac("token", token_digest)[:16])

    def csrf(self, nonce: str) -> str:
        """The CSRF token of the login ``nonce`` names."""
        return _b64(self._mac("csrf", nonce))

    def sign(self, actor: str, expires: int, token_tag: str) -> tuple[str, Claims]:
        """A new cookie value for ``actor`` until ``expires``, and its claims."""
        claims = Claims(actor, int(expires), _b64(secrets.token_bytes(16)), token_tag)
        body = ".".join((VERSION, _b64(actor.encode()), str(claims.expires), claims.nonce,
                         token_tag))
        return f"{body}.{_b64(self._mac('cookie', body))}", claims

    def check(self, value: str | None, now: float) -> Claims | None:
        """The claims of ``value`` when it is well formed, signed under this key and
        not expired at ``now``; else ``None``."""
        if not value or len(value) > 1024:
            return None
        body, _, mac = value.rpartition(".")
        fields = body.split(".")
        if len(fields) != 5 or fields[0] != VERSION:
            return None
        # the encoded MAC is compared, not its bytes: base64 decodes several spellings
        # to the same bytes, and only the one this signer wrote is accepted
        if not hmac.compare_digest(mac.encode(), _b64(self._mac("cookie", body)).encode()):
            return None
        try:
            actor = _unb64(fields[1]).decode("utf-8")
            expires = int(fields[2])
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        if expires <= now:
            return None
        return Claims(actor, expires, fields[3], fields[4])


def load_secret(path: str | Path) -> bytes:
    """The cockpit's secret key in ``path``, made there (mode 0600, 32 random bytes,
    hex) when the file does not exist yet. Workers given the same path share it;
    two starting at once make it once.

    Raises:
        ConfigError: the file is unreadable, too short, or readable by other users.
    """
    p = Path(path)
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        # written whole under another name, then linked in place: a worker reads a
        # whole key or none, and the first link wins
        tmp = p.with_name(f"{p.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(SECRET_BYTES) + "\n")
        try:
            os.link(tmp, p)
        except FileExistsError:  # another worker made it first: theirs is read
            pass
        finally:
            tmp.unlink()
    try:
        if os.name == "posix" and p.stat().st_mode & 0o077:
            raise ConfigError(f"{p}: the cockpit's secret key is readable by other users; "
                              f"chmod 600 {p}")
        text = p.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the cockpit's secret key: {exc}") from exc
    if len(text) < 2 * SECRET_BYTES:
        raise ConfigError(f"{p}: the cockpit's secret key is too short (delete the file "
                          "to have a new one made; every browser then logs in again)")
    return text.encode("ascii")
