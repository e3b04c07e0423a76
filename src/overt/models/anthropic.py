"""Claude over the Anthropic Messages API, with the official SDK (the ``anthropic`` extra).

``--model anthropic:MODEL`` (``anthropic:claude-sonnet-4-5``) builds an
:class:`AnthropicModel` from the ``anthropic`` provider settings (see
:func:`build`); the library never reads the environment: the CLI puts
``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` into those settings.

How the conversation maps onto the wire is :mod:`overt.models.anthropic_wire`.

Retries are the SDK's, configured as for every hosted model
(:mod:`overt.models.retries`): ``max_retries`` and ``timeout_s``. 429, 529 and
other 5xx, 408, dropped connections and timeouts are retried, waiting what the
API asks for or backing off; ``info["attempts"]`` says how many requests a
reply took. An ``error`` event inside a stream is not retried.

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
import json
from collections.abc import Mapping
from typing import Any

from overt.errors import ConfigError, ExtraMissingError, ModelError, ModelOutputError, UsageError
from overt.models.anthropic_wire import ReplayStore, WireReply, from_wire, to_wire
from overt.models.base import TextSink
from overt.models.options import ModelOptions
from overt.models.retries import DEFAULT_MAX_RETRIES, attempts, check, client_options
from overt.types import ModelRequest, ModelResponse, Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
_HINTS = {
    400: "the API refused the request as malformed",
    401: "check the API key (ANTHROPIC_API_KEY)",
    403: "the API key may not use this model or feature",
    404: "check the model name",
}


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
    ``max_retries`` and ``timeout_s`` go to the SDK client (:mod:`overt.models.retries`).

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
        max_retries: int = DEFAULT_MAX_RETRIES,
        stream: bool = False,
        prices: Mapping[str, tuple[float, float]] | None = None,
        name: str | None = None,
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
        check("anthropic", max_retries, timeout_s)
        if max_tokens < 1:
            raise ConfigError("anthropic: max_tokens must be positive")
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
        self.stream = stream
        self.prices = dict(prices or {})
        self._api_key = api_key
        self._replay = ReplayStore()
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, base_url={self.base_url!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the Messages API (the SDK retries transient failures).

        Raises:
            AnthropicAPIError: the API refused the request, or it kept failing
                after the retries, or it could not be reached.
            ModelOutputError: a streamed reply could not be read.
            ModelError: a tool message lacks its ``tool_call_id``.
        """
        return await self._answer(request, None)

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """As :meth:`complete`, over the SDK's ``messages.stream`` whatever
        ``stream`` says, each text delta sent to ``on_text`` as it arrives (thinking
        and tool input are not text deltas). A retried attempt streams again from
        its start; the engine settles what was shown against the answer.

        Raises:
            AnthropicAPIError, ModelOutputError, ModelError: as :meth:`complete`.
        """
        return await self._answer(request, on_text)

    async def _answer(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
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
        message, request_id, attempts = await self._send(params, on_text)
        try:
            reply = from_wire(message)
        except ModelOutputError as exc:
            raise ModelOutputError(f"{self.name}: {exc}") from None
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
            info={k: v for k, v in info.items() if v is not None}, sent=params)

    async def aclose(self) -> None:
        """Close the HTTP connections (the model stays usable: a later call reopens them)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    # -- sending ----------------------------------------------------------------

    async def _send(self, params: dict[str, Any],
                    on_text: TextSink | None = None) -> tuple[dict[str, Any], str | None, int]:
        client = self._connection()
        try:
            if self.stream or on_text is not None:
                return await self._streamed(client, params, on_text)
            raw = await client.messages.with_raw_response.create(**params)
            try:
                message = await raw.parse()
            except ValueError as exc:  # a body that says JSON and is not
                raise ModelOutputError(f"{self.name}: the reply is not JSON: {exc}") from exc
            if not hasattr(message, "to_dict"):  # a body of another type: a proxy's page
                raise ModelOutputError(
                    f"{self.name}: the reply is not a Messages API message (content-type "
                    f"{raw.headers.get('content-type')!r}): {str(message)[:200]!r}")
            # (its shape is checked by anthropic_wire, which names what is wrong: no
            # serializer warnings on a malformed reply)
            body = message.to_dict(mode="json", warnings=False)
            return body, raw.request_id, attempts(raw.http_request)
        except self._sdk.AnthropicError as exc:
            raise self._error(exc) from exc

    async def _streamed(self, client: Any, params: dict[str, Any],
                        on_text: TextSink | None = None) -> tuple[dict[str, Any], str | None, int]:
        """The streamed reply, as :meth:`_send`'s. The SDK reads a tool's input JSON
        leniently (a cut one reads as what it had): each is read again here, whole,
        and one that is not JSON is handed on as text, a malformed call. A stream that
        ends before its ``message_stop`` is not an answer.

        Raises:
            ModelOutputError: the stream could not be read, or ended early.
        """
        inputs: dict[int, str] = {}
        stopped = False
        async with client.messages.stream(**params) as stream:
            try:
                async for event in stream:
                    if event.type == "text" and on_text is not None:
                        on_text(event.text)
                    elif event.type == "content_block_delta" and \
                            event.delta.type == "input_json_delta":
                        inputs[event.index] = inputs.get(event.index, "") + \
                            event.delta.partial_json
                    stopped = stopped or event.type == "message_stop"
                if not stopped:
                    raise ModelOutputError(f"{self.name}: the stream ended before its "
                                           "message_stop: the reply is incomplete")
                message = await stream.get_final_message()
            except (ValueError, LookupError, TypeError, AttributeError, RuntimeError,
                    AssertionError) as exc:
                # the SDK's words for a stream it cannot follow: data that is not JSON,
                # a delta for a block never started, an event before message_start
                raise ModelOutputError(f"{self.name}: the streamed reply could not be "
                                       f"read: {type(exc).__name__}: {exc}") from exc
            data: dict[str, Any] = message.to_dict(mode="json", warnings=False)
            for index, text in inputs.items():
                try:
                    json.loads(text or "{}")  # a tool without input streams ""
                except ValueError:
                    data["content"][index]["input"] = text  # read as a malformed call
            return data, stream.request_id, attempts(stream.response.request)

    def _error(self, exc: Exception) -> AnthropicAPIError:
        sent = attempts(getattr(exc, "request", None))
        tries = f"after {sent} attempts" if sent > 1 else "not retried"
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            status, kind = exc.status_code, exc.type or "unknown_error"
            request_id = exc.request_id
            where = f"HTTP {status} " if status >= 400 else "in the stream: "
            text = f"{self.name}: {where}{kind}: {exc.api_message or exc.message}"
            if request_id:
                text += f" (request {request_id})"
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
                                 attempts=sent)

    def _connection(self) -> Any:
        # An HTTP connection pool belongs to the event loop that opened it, and
        # asyncio.run() makes a new loop each time: one client per loop.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = self._sdk.AsyncAnthropic(
                api_key=self._api_key, base_url=self.base_url,
                **client_options(self._sdk, self.max_retries, self.timeout_s))
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


# -- the provider --------------------------------------------------------------

_SETTINGS: dict[str, tuple[type, ...]] = {
    "api_key": (str,), "base_url": (str,), "max_tokens": (int,), "temperature": (int, float),
    "thinking": (Mapping,), "timeout_s": (int, float), "max_retries": (int,),
    "stream": (bool,), "prices": (Mapping,),
    "api_key_env": (str,),  # resolved into api_key by the entry points; named when missing
}


def build(arg: str, options: ModelOptions) -> AnthropicModel:
    """The model ``anthropic:ARG``, from ``options.settings("anthropic")``.

    Settings are the keyword arguments of :class:`AnthropicModel`: ``api_key``
    (required), ``base_url``, ``max_tokens``, ``temperature``, ``thinking``,
    ``timeout_s``, ``max_retries``, ``stream``, ``prices``. ``api_key_env`` (which the
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
