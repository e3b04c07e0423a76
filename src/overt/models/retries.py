"""One retry policy for hosted models: the provider SDK's own.

The Anthropic and OpenAI-compatible adapters hand the same two settings to their
official SDK client and write no retry loop of their own:

- ``max_retries`` (default :data:`DEFAULT_MAX_RETRIES`, the SDKs' own default):
  how many times a failed request is sent again;
- ``timeout_s``: the limit on each attempt; connecting gets at most
  :data:`CONNECT_TIMEOUT_S` of it, so an unreachable host fails fast.

The SDKs retry 408, 409, 429, 5xx, dropped connections and timeouts, and obey a
response's ``x-should-retry``. They wait what the response asks for
(``retry-after-ms``, ``retry-after``), else back off exponentially from 0.5 s
to at most 8 s, with jitter. An error event inside a streamed reply arrives
after the request succeeded and is not retried.

How many attempts a request took is read back from the ``x-stainless-retry-count``
header both SDKs put on every request they send, so the record and the error
message can say it.
"""

from __future__ import annotations

from typing import Any

from overt.errors import ConfigError

DEFAULT_MAX_RETRIES = 2
CONNECT_TIMEOUT_S = 10.0
_RETRY_COUNT = "x-stainless-retry-count"


def check(provider: str, max_retries: int, timeout_s: float) -> None:
    """Refuse settings the SDK would misread.

    Raises:
        ConfigError: ``timeout_s`` is not positive or ``max_retries`` is negative.
    """
    if max_retries < 0 or timeout_s <= 0:
        raise ConfigError(f"{provider}: timeout_s must be positive, max_retries not negative")


def client_options(sdk: Any, max_retries: int, timeout_s: float) -> dict[str, Any]:
    """The retry and timeout keyword arguments of an SDK client (``sdk`` is the
    ``anthropic`` or ``openai`` module)."""
    return {"max_retries": max_retries,
            "timeout": sdk.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S))}


def attempts(request: Any) -> int:
    """How many requests the SDK sent, ``request`` (its HTTP request) being the last."""
    headers = getattr(request, "headers", None)
    raw = headers.get(_RETRY_COUNT) if headers is not None else None
    return int(raw) + 1 if isinstance(raw, str) and raw.isdigit() else 1
