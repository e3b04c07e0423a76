"""Bearer tokens for the HTTP channels: stored hashed, each naming an actor.

A tokens file is JSON, one object mapping the SHA-256 of a token (hex) to the
actor it authenticates (``KIND:NAME``)::

    {"sha256:9f86d0…": "mcp_client:claude-code", "sha256:2c26b4…": "operator:alice"}

The token itself is shown once, when it is made (``overt serve --add-token
ACTOR``), and never stored: whoever reads the file cannot call the API. What an
actor may do is its capabilities (:mod:`overt.policy.capabilities`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from overt import json_input
from overt.errors import ConfigError, UsageError
from overt.policy.actors import Actor

TOKEN_PREFIX = "ovt_"
_HEX = frozenset("0123456789abcdef")


def token_digest(token: str) -> str:
    """The stored form of ``token``: ``sha256:`` and the hex digest."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


class Tokens:
    """Token digests and the actors they authenticate."""

    def __init__(self, digests: Mapping[str, str] | None = None) -> None:
        """``digests``: ``sha256:HEX`` -> ``KIND:NAME``.

        Raises:
            ConfigError: a digest or an actor is malformed.
        """
        self._actors: dict[str, Actor] = {}
        for given, actor in (digests or {}).items():
            # hex in either case is the same digest; anything else would never match
            digest = given.lower()
            if not digest.startswith("sha256:") or len(digest) != 71 \
                    or not all(c in _HEX for c in digest[7:]):
                raise ConfigError(f"token digest {given[:16]!r}… is not sha256:<64 hex>")
            if digest in self._actors:
                raise ConfigError(f"token {digest[:15]}… is listed twice")
            try:
                self._actors[digest] = Actor.parse(actor)
            except UsageError as exc:
                raise ConfigError(f"token {digest[:15]}…: {exc}") from exc

    def __len__(self) -> int:
        return len(self._actors)

    def actor(self, token: str) -> Actor | None:
        """The actor ``token`` authenticates, or ``None``."""
        wanted = token_digest(token)
        for digest, actor in self._actors.items():
            if hmac.compare_digest(digest, wanted):
                return actor
        return None

    def actor_for_header(self, authorization: str | None) -> Actor | None:
        """The actor of an ``Authorization: Bearer TOKEN`` header, or ``None``."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.actor(token.strip())

    def as_dict(self) -> dict[str, str]:
        return {digest: str(actor) for digest, actor in self._actors.items()}

    @classmethod
    def load(cls, path: str | Path) -> Tokens:
        """The tokens in ``path`` (none when it does not exist).

        Raises:
            ConfigError: the file is not a JSON object of digests to actors.
        """
        p = Path(path)
        if not p.exists():
            return cls()
        try:
            data = json_input.loads(p.read_text(encoding="utf-8"), what="the tokens file",
                                    object_pairs_hook=_no_repeats)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{p}: not a tokens file: {exc}") from exc
        if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise ConfigError(f"{p}: a tokens file is a JSON object of digest -> actor")
        return cls(data)


def _no_repeats(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys are all different (``json`` keeps the last of two
    silently: a token listed twice would authenticate whichever actor came last)."""
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"{key[:15]}… is listed twice")
        seen[key] = value
    return seen


def add_token(path: str | Path, actor: Actor) -> str:
    """Make a token for ``actor``, store its digest in ``path`` and return the token
    (the only time it is seen). The file is written with mode 0600.

    Raises:
        ConfigError: the existing file is malformed.
        OSError: the file cannot be written.
    """
    tokens = Tokens.load(path).as_dict()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    tokens[token_digest(token)] = str(actor)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(tokens, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, p)
    return token
