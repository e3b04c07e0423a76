"""Claude over the Anthropic Messages API, with the official SDK (the ``anthropic`` extra).

``--model anthropic:MODEL`` (``anthropic:claude-sonnet-4-5``) builds an
:class:`AnthropicModel` from the ``anthropic`` provider settings (see
:func:`build`); the library never reads the environment: the CLI puts
``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` into those settings.

How the conversation maps onto the wire is :mod:`overt.models.anthropic_wire`.

Retries. The SDK's own retries are off; this adapter retries, so that every
attempt is counted (``info["attempts"]``) and the waits are bounded and
testable. Retried: 429, 529 and other 5xx, 408, an ``error`` event inside a
stream that says rate limit or overload, connection errors and timeouts;
never when the response says ``x-should-retry: false``. The wait is what the
response asks for (``retry-after-ms`` or ``retry-after``) or else jittered
exponential backoff, ``backoff_s * 2**n`` capped at ``backoff_max_s``, less up
to a quarter. A request the API asks to delay past ``max_retry_after_s`` is
given up at once rather than retried early.

Errors. Anything the API or the connection does wrong ends as
:class:`AnthropicAPIError` (a :class:`~overt.errors.ModelError`): its message
names the HTTP status, the API's error type and message, the request id, and
how many attempts were made; 400/401/403/404 are not retried and carry a hint.
The API key never appears in a message.

``info`` holds identifiers and numbers only: request and message ids, the
model the API reports, ``stop_sequence``, cache token counts, attempts, the
sampling parameters, thinking block counts. Cost is 0 unless ``prices`` names
the model (USD per million input and output tokens; cache writes are priced at
1.25 times input, cache reads at 0.1 times, as Anthropic bills them).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from overt.errors import ConfigError, ExtraMissingError, ModelError, ModelOutputError, UsageError
from overt.models.anthropic_wire import ReplayStore, WireReply, from_wire, to_wire
from overt.models.options import ModelOptions
from overt.types import ModelRequest, ModelResponse, Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
_RETRY_ERROR_TYPES = frozenset({"rate_limit_error", "overloaded_error", "api_error"})
_HINTS = {
    400: "the API refused the request as malformed",
    401: "check the API key (ANTHROPIC_API_KEY)",
    403: "the API key may not use this model or feature",
    404: "check the model name",
}

Sleep = Callable[[float], Awaitable[None]]


class AnthropicAPIError(ModelError):
    """The Anthropic API refused or failed a request, after any retries.

    ``status`` is the HTTP status (``None`` when no response came: a connection
    error or a timeout), ``error_type`` the API's ``error.type``
    (``"rate_limit_error"``, ``"overloaded_error"``, ``"authentication_error"``,
    or ``"connection_error"`` / ``"timeout"``), ``request_id`` the API's
    ``request-id`` header, ``attempts`` how many requests were sent.
    """

    def __init__(self, message: str, *, status: int | None, error_type: str,
                 request_id: str | None, attempts: int) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.request_id = request_id
        self.attempts = attempts


class AnthropicModel:
    """A Claude model behind the Messages API (``anthropic:MODEL``).

    ``thinking`` is the API's thinking setting, e.g.
    ``{"type": "enabled", "budget_tokens": 2048}``; thinking tokens count
    toward ``max_tokens``, so a limit no larger than the budget is raised by
    the budget. ``temperature`` is sent only when set. ``stream`` reads the
    reply as server-sent events (for long replies; the result is the same).
    ``sleep`` waits between retries (replace it in tests).

    Raises:
        ExtraMissingError: the ``anthropic`` package is not installed.
        ConfigError: no API key, or a setting out of range.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        max_tokens: int = 1024,
        temperature: float | None = None,
        thinking: Mapping[str, Any] | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        stream: bool = False,
        prices: Mapping[str, tuple[float, float]] | None = None,
        name: str | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise ExtraMissingError("anthropic", "anthropic") from exc
        if not model:
            raise UsageError("name the Claude model: anthropic:MODEL")
        if not api_key:
            raise ConfigError(f"anthropic:{model} needs an API key: set ANTHROPIC_API_KEY, "
                              "or api_key in the anthropic provider settings")
        if max_tokens < 1 or max_retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise ConfigError("anthropic: max_tokens and timeout_s must be positive, "
                              "max_retries and backoff_s not negative")
        if thinking is not None and thinking.get("type") == "enabled" and not (
                isinstance(thinking.get("budget_tokens"), int)
                and thinking["budget_tokens"] >= 1024):
            raise ConfigError("anthropic: thinking {'type': 'enabled'} needs an integer "
                              "budget_tokens of at least 1024")
        self._sdk: Any = anthropic
        self.model = model
        self.name = name or f"anthropic:{model}"
        self.base_url = base_url.rstrip("/")
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.thinking = dict(thinking) if thinking is not None else None
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.max_retry_after_s = max_retry_after_s
        self.stream = stream
        self.prices = dict(prices or {})
        self._api_key = api_key
        self._sleep = sleep
        self._replay = ReplayStore()
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, base_url={self.base_url!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the Messages API, retrying transient failures.

        Raises:
            AnthropicAPIError: the API refused the request, or it kept failing
                after the retries, or it could not be reached.
            ModelOutputError: a streamed reply could not be read.
            ModelError: a tool message lacks its ``tool_call_id``.
        """
        wire = to_wire(request.messages, request.tools, self._replay.recall)
        max_tokens = request.max_output_tokens or self.max_tokens
        thinking = self.thinking if wire.thinking_allowed else None
        budget = thinking.get("budget_tokens") if thinking else None
        if isinstance(budget, int) and max_tokens <= budget:
            max_tokens += budget
        params: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                  "messages": wire.messages}
        if wire.system:
            params["system"] = wire.system
        if wire.tools:
            params["tools"] = wire.tools
        if thinking:
            params["thinking"] = thinking
        if self.temperature is not None:  # not among the SDK's arguments: sent as is
            params["extra_body"] = {"temperature": self.temperature}
        message, request_id, attempts = await self._send(params)
        reply = from_wire(message.to_dict(mode="json"))
        self._replay.remember(reply)
        info: dict[str, Any] = {
            "request_id": request_id, **reply.info,
            "cache_creation_input_tokens": reply.cache_creation_input_tokens,
            "cache_read_input_tokens": reply.cache_read_input_tokens,
            "attempts": attempts, "max_tokens": max_tokens,
            "anthropic_sdk": str(self._sdk.__version__),
        }
        if self.temperature is not None:
            info["temperature"] = self.temperature
        if isinstance(budget, int):
            info["thinking_budget_tokens"] = budget
        if self.thinking and not thinking:
            info["thinking_omitted"] = True  # no thinking blocks to send back this time
        return ModelResponse(
            text=reply.text, tool_calls=reply.tool_calls, model=self.name,
            usage=Usage(reply.input_tokens, reply.output_tokens, self._cost(reply)),
            stop_reason=reply.stop_reason, reasoning=reply.reasoning,
            info={k: v for k, v in info.items() if v is not None})

    async def aclose(self) -> None:
        """Close the HTTP connections (the model stays usable: a later call reopens them)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    # -- sending, with retries ----------------------------------------------

    async def _send(self, params: dict[str, Any]) -> tuple[Any, str | None, int]:
        sdk, client = self._sdk, self._connection()
        attempt = 0
        while True:
            attempt += 1
            try:
                if self.stream:
                    return (*await self._streamed(client, params), attempt)
                message = await client.messages.create(**params)
                return message, getattr(message, "_request_id", None), attempt
            except sdk.APIStatusError as exc:
                failure: Exception = exc
            except sdk.APIConnectionError as exc:
                failure = exc
            except sdk.AnthropicError as exc:
                raise self._error(exc, attempt) from exc
            delay = self._retry_delay(failure, attempt)
            if delay is None:
                raise self._error(failure, attempt) from failure
            await self._sleep(delay)

    async def _streamed(self, client: Any, params: dict[str, Any]) -> tuple[Any, str | None]:
        async with client.messages.stream(**params) as stream:
            try:
                return await stream.get_final_message(), stream.request_id
            except ValueError as exc:  # the SDK's word for a tool input that is not JSON
                raise ModelOutputError(f"{self.name}: the streamed reply could not be "
                                       f"read: {exc}") from exc

    def _retry_delay(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``; ``None``: give up."""
        if attempt > self.max_retries:
            return None
        if isinstance(exc, self._sdk.APIStatusError):
            headers = exc.response.headers
            verdict = headers.get("x-should-retry")
            if verdict == "false" or (verdict != "true" and not _retryable(exc)):
                return None
            asked = retry_after(headers)
            if asked is not None:
                return asked if asked <= self.max_retry_after_s else None
        backoff = min(self.backoff_max_s, self.backoff_s * 2.0 ** (attempt - 1))
        return backoff * (1 - 0.25 * random.random())  # jitter: spread out the retries

    def _error(self, exc: Exception, attempts: int) -> AnthropicAPIError:
        tries = f"after {attempts} attempts" if attempts > 1 else "not retried"
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            status, kind = exc.status_code, exc.type or "unknown_error"
            request_id = exc.request_id
            where = f"HTTP {status} " if status >= 400 else "in the stream: "
            text = f"{self.name}: {where}{kind}: {exc.api_message or exc.message}"
            if request_id:
                text += f" (request {request_id})"
            asked = retry_after(exc.response.headers)
            if asked is not None and asked > self.max_retry_after_s:
                tries += (f"; the API asks to wait {asked:g} s, more than "
                          f"max_retry_after_s={self.max_retry_after_s:g}")
            hint = _HINTS.get(status)
            text += f"; {tries}" + (f": {hint}" if hint else "")
        else:
            status, request_id = None, None
            kind = "timeout" if isinstance(exc, sdk.APITimeoutError) else (
                "connection_error" if isinstance(exc, sdk.APIConnectionError) else "sdk_error")
            cause = exc.__cause__ or exc.__context__
            detail = f"{exc}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
            text = f"{self.name}: {kind} talking to {self.base_url}: {detail}; {tries}"
        if len(self._api_key) >= 8:
            text = text.replace(self._api_key, "[api key]")
        return AnthropicAPIError(text, status=status, error_type=kind, request_id=request_id,
                                 attempts=attempts)

    def _connection(self) -> Any:
        # An HTTP connection pool belongs to the event loop that opened it, and
        # asyncio.run() makes a new loop each time: one client per loop.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = self._sdk.AsyncAnthropic(
                api_key=self._api_key, base_url=self.base_url, max_retries=0,
                timeout=self._sdk.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)))
            self._client_loop = loop
        return self._client

    def _cost(self, reply: WireReply) -> float:
        price = self.prices.get(self.model) or self.prices.get(self.name)
        if price is None:
            return 0.0
        per_input, per_output = price
        tokens = (reply.input_tokens * per_input + reply.output_tokens * per_output
                  + reply.cache_creation_input_tokens * per_input * 1.25
                  + reply.cache_read_input_tokens * per_input * 0.1)
        return round(tokens / 1_000_000, 10)


def _retryable(exc: Any) -> bool:
    status: int = exc.status_code
    if status in (408, 429) or status >= 500:
        return True
    return status < 400 and exc.type in _RETRY_ERROR_TYPES  # an error event in a stream


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for, in seconds: ``retry-after-ms``, then ``retry-after``
    (seconds or an HTTP date); ``None`` when it asks for none."""
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(key)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) * scale)
        except ValueError:
            parsed = email.utils.parsedate_tz(raw) if key == "retry-after" else None
            if parsed is not None:
                return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return None


# -- the provider --------------------------------------------------------------

_SETTINGS: dict[str, tuple[type, ...]] = {
    "api_key": (str,), "base_url": (str,), "max_tokens": (int,), "temperature": (int, float),
    "thinking": (Mapping,), "timeout_s": (int, float), "max_retries": (int,),
    "backoff_s": (int, float), "backoff_max_s": (int, float),
    "max_retry_after_s": (int, float), "stream": (bool,), "prices": (Mapping,),
    "api_key_env": (str,),  # resolved into api_key by the entry points; named when missing
}


def build(arg: str, options: ModelOptions) -> AnthropicModel:
    """The model ``anthropic:ARG``, from ``options.settings("anthropic")``.

    Settings are the keyword arguments of :class:`AnthropicModel`: ``api_key``
    (required), ``base_url``, ``max_tokens``, ``temperature``, ``thinking``,
    ``timeout_s``, ``max_retries``, ``backoff_s``, ``backoff_max_s``,
    ``max_retry_after_s``, ``stream``, ``prices``. ``api_key_env`` (which the
    entry points resolve into ``api_key``) is only named when the key is missing.

    Raises:
        UsageError: no model name.
        ConfigError: no API key, or an unknown or mistyped setting.
        ExtraMissingError: the ``anthropic`` package is not installed.
    """
    if not arg:
        raise UsageError("name the Claude model: --model anthropic:MODEL "
                         "(e.g. anthropic:claude-sonnet-4-5)")
    settings = dict(options.settings("anthropic"))
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise ConfigError(f"unknown anthropic settings {unknown}; known: {sorted(_SETTINGS)}")
    for key, value in settings.items():
        kinds = _SETTINGS[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ConfigError(f"anthropic setting {key} must be "
                              f"{' or '.join(k.__name__ for k in kinds)}, "
                              f"got {type(value).__name__}")
    variable = settings.pop("api_key_env", None)
    if not settings.get("api_key"):
        raise ConfigError(f"anthropic:{arg} needs an API key: set "
                          f"{variable or 'ANTHROPIC_API_KEY'} (the command line reads it), or "
                          "api_key in the anthropic provider settings")
    return AnthropicModel(arg, **settings)
