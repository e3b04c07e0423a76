"""OpenAI-compatible chat completions (``openai:MODEL``): OpenAI, vLLM, llama.cpp's server, Ollama.

One adapter for every server that speaks ``POST /v1/chat/completions``, through
the official SDK (the ``openai`` extra) with a configurable ``base_url``.

=============  =======================================================================
overt          chat completions wire format
=============  =======================================================================
system, user   ``{"role": "system" | "user", "content": TEXT}``
assistant      ``{"role": "assistant", "content": TEXT, "tool_calls": [{"id",
               "type": "function", "function": {"name", "arguments": JSON string}}]}``
tool           ``{"role": "tool", "tool_call_id": ID, "content": TEXT}``
ToolSpec       ``{"type": "function", "function": {"name", "description",
               "parameters"}}`` (:func:`overt.tools.shapes.to_openai`)
=============  =======================================================================

Tool calls come back two ways. Servers that parse them return
``choices[0].message.tool_calls``, whose ``arguments`` are a JSON string; one
that does not decode to an object gives a :class:`~overt.types.ToolCall` with
``malformed`` set (the engine answers it with an error), never an exception.
Servers that only render the model's chat template (llama.cpp's server with the
GGUF's own template, small models behind vLLM or Ollama) return the call as
JSON text in ``content``: when a reply has no structured calls and tools were
sent, :func:`overt.models.toolcall_parse.parse_tool_calls` lifts tagged, fenced
or bare JSON calls out of it. ``info["tool_calls_from"]`` says which it was.

Small models and tool results. Served by llama.cpp with its own template, the
embedded 0.5B model, shown its tool results in the native ``<tool_response>``
form with the tools still offered, calls the tool again instead of answering:
asked "What is my token usage today?" it called ``get_usage`` five times, then
gave an empty answer (six inferences). ``fold_tool_results`` sends an answer
turn as :mod:`overt.models.local` does for the embedded model
(:func:`overt.models.qwen_chat.answer_messages`): the tool round folded into
one user message, no tools. The same question then took two inferences and
was answered "The token usage today is 735 tokens." Off by default: models
that handle tool messages natively lose the structure that way.

Failures. Retries are the SDK's, configured as for every hosted model
(:mod:`overt.models.retries`): ``max_retries`` and ``timeout_s``; 408, 409,
429, 5xx and connection errors are retried with backoff (honouring
``retry-after``). What is left becomes a :class:`~overt.errors.ModelError`
naming the HTTP status, the server's message and the attempts made, with the
API key (and anything shaped like one) removed. A reply that cannot be read (a
body that is not JSON, a choice without a message, a stream that ends before
its ``finish_reason``: the connection cut mid-answer) is a
:class:`~overt.errors.ModelOutputError`, never taken as the answer; usage
counts that are not whole numbers of tokens are recorded as 0.

``info`` holds identifiers and numbers only: the endpoint (without
credentials), response id, served model, system fingerprint, finish reason,
where the calls came from, how many tools were sent, whether the tool round
was folded, the sampling parameters sent, and how many requests it took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from overt.errors import ConfigError, ExtraMissingError, ModelError, ModelOutputError, UsageError
from overt.ids import new_ulid
from overt.models.base import TextSink
from overt.models.options import ModelOptions
from overt.models.qwen_chat import answer_messages, has_tool_results
from overt.models.retries import DEFAULT_MAX_RETRIES, attempts, check, client_options
from overt.models.stream_text import AnswerFilter
from overt.models.toolcall_parse import parse_tool_calls, split_reasoning
from overt.tools.shapes import to_openai
from overt.types import Message, ModelRequest, ModelResponse, ToolCall, Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_KEY = "not-needed"
"""Sent as the API key when none is configured: local servers ignore it, the SDK wants one."""

_STOP_REASONS = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end_turn",
                 "length": "max_tokens", "content_filter": "content_filter"}
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}")  # OpenAI echoes keys masked
_MAX_MESSAGE = 600


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; the ledger's canonical JSON cannot hold them.
    raise ValueError(f"{name} is not valid JSON")


def _decode_arguments(raw: object) -> tuple[dict[str, Any], str | None]:
    """A call's ``arguments`` (a JSON string) as an object, and why not when it is not one."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, Mapping):  # some servers send the object itself
        return dict(raw), None
    if not isinstance(raw, str):
        return {}, f"arguments must be a JSON string, got {type(raw).__name__}"
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        reason = getattr(exc, "msg", None) or type(exc).__name__
        return {}, f"arguments are not valid JSON ({reason})"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def _wire_name(name: str) -> str:
    """A function name the API accepts (``^[A-Za-z0-9_-]{1,64}$``), for calls in history.

    A malformed call may carry an empty or invented name; sent as it is, the
    whole request would be refused.
    """
    return _BAD_NAME_CHARS.sub("_", name)[:64] or "unnamed_tool"


def to_wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """overt messages as chat completions messages.

    Raises:
        UsageError: a tool message has no ``tool_call_id``.
    """
    wire: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            if not m.tool_call_id:
                raise UsageError("a tool message needs the tool_call_id of the call it answers")
            wire.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            # content "" rather than null: llama.cpp's server refuses a null content
            wire.append({"role": "assistant", "content": m.content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {
                    "name": _wire_name(c.name),
                    "arguments": json.dumps(dict(c.arguments), ensure_ascii=False)}}
                for c in m.tool_calls]})
        else:
            wire.append({"role": m.role, "content": m.content})
    return wire


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def from_wire_tool_calls(calls: Sequence[Any]) -> tuple[ToolCall, ...]:
    """``message.tool_calls`` (SDK objects or dicts) as overt tool calls. Never raises."""
    out: list[ToolCall] = []
    for call in calls:
        call_id = str(_field(call, "id") or new_ulid())
        function = _field(call, "function")
        kind = _field(call, "type") or "function"
        if kind != "function" or function is None:
            out.append(ToolCall(call_id, "", {}, malformed=f"unsupported tool call type {kind!r}"))
            continue
        name = _field(function, "name")
        if not isinstance(name, str) or not name.strip():
            out.append(ToolCall(call_id, "", {}, malformed="tool call has no function name"))
            continue
        arguments, problem = _decode_arguments(_field(function, "arguments"))
        out.append(ToolCall(call_id, name.strip(), arguments, malformed=problem))
    return tuple(out)


def _endpoint(base_url: str) -> str:
    """``base_url`` without credentials, query or fragment: an identifier for the record."""
    parts = urlsplit(base_url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"


class OpenAICompatModel:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``model`` is the name the server serves (``gpt-4o-mini``, or a llama.cpp
    server's ``--model_alias``); ``name``, what the ledger records, defaults to
    ``openai:<model>``. ``api_key`` may be ``None`` for local servers.
    ``temperature``, ``seed`` and ``max_tokens`` are sent only when set (a
    request's ``max_output_tokens`` wins over ``max_tokens``). ``prices`` maps
    a model (``model`` or ``name``) to USD per million input and output
    tokens, ``{"gpt-4o-mini": (0.15, 0.6)}``; unpriced, the cost is 0.0.
    ``fold_tool_results``: see the module docstring.

    The SDK client is made on first use, one per event loop (a connection
    pool belongs to the loop that opened it); :meth:`aclose` closes it.

    Raises:
        UsageError: ``model`` is empty.
        ConfigError: ``timeout_s`` is not positive or ``max_retries`` is negative.
    """

    def __init__(self, model: str, *, base_url: str = DEFAULT_BASE_URL,
                 api_key: str | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                 timeout_s: float = 60.0,
                 temperature: float | None = None, seed: int | None = None,
                 max_tokens: int | None = None,
                 prices: Mapping[str, tuple[float, float]] | None = None,
                 fold_tool_results: bool = False, name: str | None = None) -> None:
        if not model:
            raise UsageError("name the model the server serves: --model openai:NAME")
        check("openai", max_retries, timeout_s)
        self.model = model
        self.name = name or f"openai:{model}"
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.prices = dict(prices or {})
        self.fold_tool_results = fold_tool_results
        self._api_key = api_key or NO_KEY
        self._clients: dict[asyncio.AbstractEventLoop, Any] = {}

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatModel({self.model!r}, base_url={_endpoint(self.base_url)!r})"

    async def _client(self) -> Any:
        try:
            import openai
        except ImportError as exc:
            raise ExtraMissingError("openai", "openai") from exc
        loop = asyncio.get_running_loop()
        for old in [lp for lp in self._clients if lp.is_closed()]:
            await _discard(self._clients.pop(old))
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key,
                                        **client_options(openai, self.max_retries,
                                                         self.timeout_s))
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (a later call opens a new one)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request``.

        Raises:
            UsageError: a tool message has no ``tool_call_id``.
        """
        messages, tools = request.messages, request.tools
        if self.fold_tool_results and has_tool_results(messages):
            messages, tools = tuple(answer_messages(messages)), ()
        body: dict[str, Any] = {"model": self.model, "messages": to_wire_messages(messages)}
        if tools:
            body["tools"] = [to_openai(spec) for spec in tools]
        for key, value in (("max_tokens", request.max_output_tokens or self.max_tokens),
                           ("temperature", self.temperature), ("seed", self.seed)):
            if value is not None:
                body[key] = value
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the server; retries are the SDK's, at most ``max_retries``.

        Raises:
            ExtraMissingError: the ``openai`` package is not installed.
            ModelError: the server refused the request (the message names the
                HTTP status and the server's message), could not be reached,
                or did not answer within ``timeout_s``.
            ModelOutputError: the reply holds no choice, cannot be read (not JSON,
                no message), or its stream ended before the reply was complete.
            UsageError: a tool message has no ``tool_call_id``.
        """
        return await self._answer(request, None)

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """As :meth:`complete`, with ``stream=True`` (chunks assembled by the SDK's
        ``ChatCompletionStreamState``, usage asked for in the last chunk): content
        deltas go to ``on_text`` through
        :class:`~overt.models.stream_text.AnswerFilter` (no call markup, no
        ``<think>``), and the reply is read from the completion the SDK assembles.

        Raises:
            ExtraMissingError, ModelError, ModelOutputError, UsageError: as
                :meth:`complete`.
        """
        return await self._answer(request, on_text)

    async def _answer(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
        client = await self._client()
        import openai

        body = self.request_body(request)
        where = _endpoint(self.base_url)
        try:
            if on_text is None:
                raw = await client.chat.completions.with_raw_response.create(**body)
                response, made = raw.parse(), attempts(raw.http_request)
            else:
                response, made = await _streamed(client, body, AnswerFilter(on_text))
        except openai.OpenAIError as exc:
            made = attempts(getattr(exc, "request", None))
            tries = f"after {made} attempts" if made > 1 else "not retried"
            if isinstance(exc, openai.APIStatusError):
                problem = f"HTTP {exc.status_code} from {where}: {_message(exc)}"
            elif isinstance(exc, openai.APITimeoutError):
                problem = f"no reply from {where} within {self.timeout_s:g} s"
            elif isinstance(exc, openai.APIConnectionError):
                problem = f"cannot reach {where}: {exc}"
            else:
                problem = f"{type(exc).__name__}: {exc}"
            raise ModelError(f"{self.name}: {self._scrub(problem)} ({tries})") from None
        except ModelOutputError as exc:  # a stream that ended early
            raise ModelOutputError(f"{self.name}: {exc} ({where})") from None
        except (ValueError, TypeError, KeyError, AttributeError, IndexError,
                AssertionError) as exc:  # a body the SDK could not read (not JSON, cut short)
            raise ModelOutputError(f"{self.name}: the reply from {where} could not be read: "
                                   f"{type(exc).__name__}: {self._scrub(str(exc))}") from None
        sent = [t["function"]["name"] for t in body.get("tools", ())]
        folded = self.fold_tool_results and has_tool_results(request.messages)
        return self._response(response, sent, body, folded, made)

    def _scrub(self, text: str) -> str:
        if self._api_key != NO_KEY:
            text = text.replace(self._api_key, "***")
        return _KEY_LIKE.sub("***", text)

    def _response(self, response: Any, sent: list[str], body: Mapping[str, Any],
                  folded: bool, tries: int) -> ModelResponse:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelOutputError(f"{self.name}: the reply holds no choices{_what(response)}")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise ModelOutputError(f"{self.name}: the reply's choice holds no message")
        text, reasoning = split_reasoning(_content_text(self.name, message.content))
        extra = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        if isinstance(extra, str) and extra.strip():
            reasoning = "\n\n".join(p for p in (extra.strip(), reasoning) if p)
        calls = from_wire_tool_calls(message.tool_calls or ())
        source = "structured" if calls else None
        if not calls and sent:
            text, calls = parse_tool_calls(text, sent)
            source = "content" if calls else None
        finish = choice.finish_reason
        stop = "tool_use" if calls else _STOP_REASONS.get(str(finish), str(finish or "end_turn"))
        usage = getattr(response, "usage", None)
        tokens_in = _tokens(getattr(usage, "prompt_tokens", 0))
        tokens_out = _tokens(getattr(usage, "completion_tokens", 0))
        per_in, per_out = self.prices.get(self.model) or self.prices.get(self.name) or (0, 0)
        cost = round((tokens_in * per_in + tokens_out * per_out) / 1_000_000, 10)
        info = {
            "endpoint": _endpoint(self.base_url),
            "response_id": getattr(response, "id", None),
            "served_model": getattr(response, "model", None),
            "system_fingerprint": getattr(response, "system_fingerprint", None),
            "finish_reason": finish,
            "tool_calls_from": source,
            "tools_sent": len(sent),
            "folded_tool_results": folded,
            "sampling": {k: body.get(k) for k in ("temperature", "seed", "max_tokens")},
            "attempts": tries,
        }
        return ModelResponse(text=text, tool_calls=calls, model=self.name, stop_reason=stop,
                             reasoning=reasoning, usage=Usage(tokens_in, tokens_out, cost),
                             info=info, sent=dict(body),
                             decisions=("answer_without_tools",) if folded else ())


def _tokens(value: object) -> int:
    """A usage count as sent, or 0 when it is not a whole number of tokens (``"many"``,
    ``-4``, ``null``): a server's broken counts do not cost the answer."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value) if math.isfinite(value) and value >= 0 else 0


async def _streamed(client: Any, body: Mapping[str, Any],
                    answer: AnswerFilter) -> tuple[Any, int]:
    """The completion of a streamed request, its content deltas fed to ``answer``,
    and how many requests the SDK sent.

    The SDK's ``chat.completions.stream`` helper hides the HTTP request it sent
    (the retry count is on it), so the request goes through the public raw
    response route instead, and the SDK's own ``ChatCompletionStreamState``
    (what that helper uses) assembles the chunks into the same completion.
    """
    from openai.lib.streaming.chat import ChatCompletionStreamState

    raw = await client.chat.completions.with_raw_response.create(
        **body, stream=True, stream_options={"include_usage": True})
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(
        input_tools=body["tools"]) if "tools" in body else ChatCompletionStreamState()
    seen = False
    async with raw.parse() as chunks:
        async for chunk in chunks:
            seen = True
            for event in state.handle_chunk(chunk):
                if event.type == "content.delta":
                    answer.feed(event.delta)
    if not seen:
        raise ModelOutputError("the stream ended before any reply")
    completion = state.get_final_completion()
    if any(choice.finish_reason is None for choice in completion.choices):
        # the connection closed mid-reply: what came is not the answer the model gave
        raise ModelOutputError("the stream ended before the reply was complete "
                               "(no finish_reason)")
    return completion, attempts(raw.http_request)


async def _discard(client: Any) -> None:
    """Close a client whose event loop has closed.

    Its sockets went with that loop and closing them fails (``RuntimeError``);
    closing still marks the client closed, so the SDK does not try again, from
    whatever loop runs when it is collected, and log the same failure there.
    """
    with contextlib.suppress(RuntimeError):
        await client.close()


def _message(exc: Any) -> str:
    """The server's own error message, else the SDK's; cut to a readable length."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        text = str(error["message"])
    elif isinstance(error, str):
        text = error
    else:
        text = str(getattr(exc, "message", "") or exc)
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " …"


_SETTINGS: dict[str, tuple[type, ...]] = {
    "api_key": (str,), "base_url": (str,), "max_retries": (int,), "timeout_s": (int, float),
    "temperature": (int, float), "seed": (int,), "max_tokens": (int,), "prices": (Mapping,),
    "fold_tool_results": (bool,),
}


def build(arg: str, options: ModelOptions) -> OpenAICompatModel:
    """The model ``openai:ARG``, from ``options.settings("openai")``.

    Settings, the keyword arguments of :class:`OpenAICompatModel`: ``base_url``
    (default :data:`DEFAULT_BASE_URL`), ``api_key`` (local servers need none),
    ``max_retries`` (2), ``timeout_s`` (60), ``temperature``, ``seed``,
    ``max_tokens``, ``prices``, ``fold_tool_results``.

    Raises:
        UsageError: no model name.
        ConfigError: an unknown or mistyped setting, or one out of range.
    """
    settings = dict(options.settings("openai"))
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise ConfigError(f"unknown openai settings {unknown}; known: {sorted(_SETTINGS)}")
    for key, value in settings.items():
        kinds = _SETTINGS[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ConfigError(f"openai setting {key} must be "
                              f"{' or '.join(k.__name__ for k in kinds)}, "
                              f"got {type(value).__name__}")
    settings["base_url"] = settings.get("base_url") or DEFAULT_BASE_URL
    return OpenAICompatModel(arg, **settings)


def _what(response: Any) -> str:
    """What a reply without choices was instead, for its error: a body that is not
    JSON (an HTML page), or the server's own error object."""
    if isinstance(response, (str, bytes)):
        return f": it is not a chat completion but {str(response)[:120]!r}"
    error = getattr(response, "error", None) or (getattr(response, "model_extra", None)
                                                 or {}).get("error")
    return f": the server says {str(error)[:200]!r}" if error else ""


def _content_text(name: str, content: Any) -> str:
    """A message's ``content``: text, nothing, or a list of parts (as some servers send)
    whose text parts are the answer.

    Raises:
        ModelOutputError: it is something else (a number, an object).
    """
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = [_field(p, "text") for p in content if _field(p, "type") == "text"]
        if all(isinstance(t, str) for t in parts):
            return "".join(t for t in parts if isinstance(t, str))
    raise ModelOutputError(f"{name}: the reply's content is not text: {str(content)[:120]!r}")
