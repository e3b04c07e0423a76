"""A PostgreSQL ledger's URL: libpq's own, plus overt's ``schema`` and ``pool_size``
parameters, and the form of it fit for a message (no password)."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, quote, urlencode, urlsplit, urlunsplit

from overt.errors import UsageError

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_OVERT_PARAMS = ("schema", "pool_size")
DEFAULT_POOL_SIZE = 4
"""Read connections per process unless the URL says ``pool_size=N``."""


def parse_url(url: str) -> tuple[str, str]:
    """(libpq conninfo URL without overt's own parameters, schema name).

    Raises:
        UsageError: the URL cannot be parsed, or the schema name is not a plain
            lower-case identifier.
    """
    parts = _split(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in params if k == "schema"), "public")
    if not _SCHEMA_NAME.match(schema):
        raise UsageError(f"invalid ledger schema name {schema!r}: use [a-z_][a-z0-9_]*")
    # libpq decodes %XX only: a space must stay %20 (urlencode's default '+' would
    # reach the server as a '+': `options=-c%20statement_timeout%3D5s` refused)
    rest = urlencode([(k, v) for k, v in params if k not in _OVERT_PARAMS],
                     quote_via=quote)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), schema


def libpq_options(conninfo: str) -> str:
    """The ``options`` parameter of a libpq URL (server settings, such as
    ``-c statement_timeout=5s``), or ``""``: a connection that sets options of its own
    passes these first, or libpq would send only its own."""
    params = parse_qsl(_split(conninfo).query, keep_blank_values=True)
    return next((v for k, v in params if k == "options"), "")


def _split(url: str) -> SplitResult:
    """``urlsplit``, its ``ValueError`` (``postgresql://[::1``) a usage error that does
    not repeat the URL (it may hold a password).

    Raises:
        UsageError: the URL cannot be parsed.
    """
    try:
        return urlsplit(url)
    except ValueError as exc:
        raise UsageError(f"invalid ledger URL: {exc}") from None


def url_pool_size(url: str) -> int:
    """The read pool's size the URL's ``pool_size`` names (:data:`DEFAULT_POOL_SIZE`
    without one).

    Raises:
        UsageError: it is not a whole number from 1 to 1000.
    """
    params = parse_qsl(_split(url).query, keep_blank_values=True)
    raw = next((v for k, v in params if k == "pool_size"), None)
    if raw is None:
        return DEFAULT_POOL_SIZE
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise UsageError(f"invalid ledger pool_size {raw!r}: a whole number, 1 to 1000")
    return int(raw)


def safe_url(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
