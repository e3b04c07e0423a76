"""The embedded default model ``local``: Qwen2.5-Coder-0.5B-Instruct through llama.cpp.

DECODING STRATEGY (to be filled in after measuring)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from overt.errors import ExtraMissingError, ModelError, UsageError
from overt.models.assets import (
    ASSETS,
    QWEN25_CODER_05B,
    ModelAsset,
    Progress,
    ensure_asset,
    known_sha256,
)
from overt.models.toolcall_parse import parse_tool_calls, split_reasoning
from overt.types import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec, Usage

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
_TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
_MAX_CALLS_PER_REPLY = 4
_CALL_START = re.compile(r'(?:^|\n)[ \t]*(?:```[a-z_]*[ \t]*\n[ \t]*)?\{\s*"name"\s*:')
_ANSWER_PROMPT = (
    "Here is what the tools returned:\n\n{results}\n\n"
    "Using these results, answer my question: {question}"
)


def _tool_json(spec: ToolSpec) -> str:
    return json.dumps({"type": "function", "function": {
        "name": spec.name, "description": spec.description,
        "parameters": dict(spec.input_schema)}}, ensure_ascii=False)


def _call_json(call: ToolCall) -> str:
    args = json.dumps(dict(call.arguments), ensure_ascii=False)
    return f'{{"name": "{call.name}", "arguments": {args}}}'


def render_chatml(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """The prompt the GGUF's own (Qwen2.5) chat template renders, written out in Python.

    Consecutive tool results share one user turn of ``<tool_response>`` blocks;
    an assistant message's tool calls are rendered as ``<tool_call>`` blocks.
    Ends with the generation prompt ``<|im_start|>assistant\\n``.
    """
    out: list[str] = []
    rest = list(messages)
    system = DEFAULT_SYSTEM
    if rest and rest[0].role == "system":
        system = rest.pop(0).content
    if tools:
        body = "".join("\n" + _tool_json(t) for t in tools)
        out.append(f"<|im_start|>system\n{system}{_TOOLS_HEADER}{body}{_TOOLS_FOOTER}<|im_end|>\n")
    else:
        out.append(f"<|im_start|>system\n{system}<|im_end|>\n")
    for i, m in enumerate(rest):
        if m.role == "tool":
            if i == 0 or rest[i - 1].role != "tool":
                out.append("<|im_start|>user")
            out.append(f"\n<tool_response>\n{m.content}\n</tool_response>")
            if i == len(rest) - 1 or rest[i + 1].role != "tool":
                out.append("<|im_end|>\n")
        elif m.role == "assistant" and m.tool_calls:
            out.append("<|im_start|>assistant")
            if m.content:
                out.append("\n" + m.content)
            for call in m.tool_calls:
                out.append(f"\n<tool_call>\n{_call_json(call)}\n</tool_call>")
            out.append("<|im_end|>\n")
        else:
            out.append(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def _result_line(m: Message) -> str:
    status = " (error)" if m.is_error else ""
    return f"{m.name or 'tool'}{status} returned:\n{m.content}"


def answer_messages(messages: Sequence[Message]) -> list[Message]:
    """Fold the tool round of the current turn into one user message.

    Everything up to the last user message stays; the assistant's tool calls
    are dropped and each tool result becomes a ``name returned: …`` line of
    one user message that repeats the question.
    """
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    if last_user < 0:
        return list(messages)
    head = list(messages[: last_user])
    question = messages[last_user].content
    results = [_result_line(m) for m in messages[last_user + 1:] if m.role == "tool"]
    text = _ANSWER_PROMPT.format(results="\n\n".join(results), question=question)
    return [*head, Message("user", text)]


def _has_tool_results(messages: Sequence[Message]) -> bool:
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return any(m.role == "tool" for m in messages[last_user + 1:])


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """JSON schema of one call ``{"name": <offered>, "arguments": <its input schema>}``."""
    variants = [{
        "type": "object",
        "properties": {"name": {"const": t.name}, "arguments": _object_schema(t.input_schema)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    } for t in tools]
    return variants[0] if len(variants) == 1 else {"oneOf": variants}


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(schema)
    if out.get("type") != "object":
        return {"type": "object"}
    return out


def _generic_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    return {"type": "object", "properties": {"name": {"enum": [t.name for t in tools]},
            "arguments": {"type": "object"}}, "required": ["name", "arguments"],
            "additionalProperties": False}


class LocalModel:
    """Qwen2.5-Coder-0.5B-Instruct (or any Qwen2.5 GGUF) run in-process by llama.cpp.

    Construction resolves the weights (``model_path``, or ``asset`` assembled
    into ``cache_dir`` by :func:`overt.models.assets.ensure_asset`); llama.cpp
    is loaded on the first :meth:`complete` (or :meth:`load`).

    Raises:
        ModelAssetError: the weights are missing (and ``download`` is false),
            cannot be fetched, or fail their hash check.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        asset: ModelAsset = QWEN25_CODER_05B,
        cache_dir: str | os.PathLike[str] | None = None,
        progress: Progress | None = None,
        download: bool = True,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        top_p: float = 0.8,
        top_k: int = 20,
        repeat_penalty: float = 1.05,
        max_tokens: int = 512,
        grammar: bool = True,
        answer_style: str = "user_message",
        name: str | None = None,
    ) -> None:
        if model_path is None:
            self.path = ensure_asset(asset, cache_dir, progress=progress, download=download)
            self._sha256: str | None = asset.sha256
            self.name = name or f"local:{asset.name}"
        else:
            self.path = Path(model_path)
            self._sha256 = None
            self.name = name or f"local:{self.path.stem}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.seed = seed
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.repeat_penalty = repeat_penalty
        self.max_tokens = max_tokens
        self.grammar = grammar
        self.answer_style = answer_style
        self._llm: Any = None
        self._lock = threading.Lock()
        self.timings: list[float] = []

    @classmethod
    def from_asset(
        cls,
        variant: str = "default",
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        progress: Progress | None = None,
        download: bool = True,
        **options: Any,
    ) -> LocalModel:
        """The local model named by ``variant``: ``"default"`` or ``""`` (the 0.5B
        model), ``"quality"`` (the 1.5B one); ``"local"``/``"local:quality"`` also work.

        ``options`` go to the constructor (``n_ctx``, ``temperature``, …).

        Raises:
            UsageError: no local model has that name.
            ModelAssetError: the weights cannot be assembled or fail their hash.
        """
        key = variant if variant.startswith("local") else f"local:{variant}"
        asset = ASSETS.get("local" if key in ("local", "local:", "local:default") else key)
        if asset is None:
            names = ", ".join(sorted(ASSETS))
            raise UsageError(f"no local model {variant!r}; known: {names}")
        return cls(asset=asset, cache_dir=cache_dir, progress=progress, download=download,
                   **options)

    # -- loading -------------------------------------------------------------

    def load(self) -> None:
        """Load llama.cpp and the weights now (else the first call does).

        Raises:
            ExtraMissingError: ``llama_cpp`` is not installed (the ``local`` extra).
            ModelError: llama.cpp could not load the file.
        """
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._llm is not None:
            return self._llm
        try:
            import llama_cpp
            from llama_cpp.llama_grammar import LlamaGrammar
        except ImportError as exc:
            raise ExtraMissingError("local", "llama_cpp") from exc
        if self._sha256 is None:
            self._sha256 = known_sha256(self.path)
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                seed=self.seed, verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp could not load {self.path}: {exc}") from exc
        self._version = str(getattr(llama_cpp, "__version__", "unknown"))
        self._grammar_cls = LlamaGrammar
        special = self._llm.tokenize(b"<tool_call><|im_end|><|endoftext|>", add_bos=False,
                                     special=True)
        self._tool_call_token = special[0]
        self._eog = {self._llm.token_eos(), *special[1:]}
        return self._llm

    # -- the protocol --------------------------------------------------------

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request``; inference runs in a worker thread, one call at a time.

        Raises:
            ExtraMissingError: ``llama_cpp`` is not installed.
            ModelError: llama.cpp failed, or the prompt does not fit ``n_ctx``.
        """
        return await asyncio.to_thread(self._complete_sync, request)

    def _complete_sync(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            llm = self._load_locked()
            t0 = time.monotonic()
            try:
                response = self._infer(llm, request)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"{self.name}: llama.cpp failed: {exc}") from exc
            self.timings.append(time.monotonic() - t0)
            return response

    # -- inference -----------------------------------------------------------

    def _infer(self, llm: Any, request: ModelRequest) -> ModelResponse:
        messages: Sequence[Message] = request.messages
        offered: Sequence[ToolSpec] = request.tools
        if _has_tool_results(messages) and self.answer_style != "native":
            offered = ()
            if self.answer_style == "user_message":
                messages = answer_messages(messages)
        prompt = llm.tokenize(render_chatml(messages, offered).encode("utf-8"), add_bos=False,
                              special=True)
        room = self.n_ctx - len(prompt)
        if room <= 16:
            raise ModelError(f"{self.name}: the prompt is {len(prompt)} tokens, which does not "
                             f"fit the context window of {self.n_ctx} tokens")
        budget = min(request.max_output_tokens or self.max_tokens, room)
        grammar = self._call_grammar(offered) if offered and self.grammar else None
        raw, generated, finish, constrained = self._decode(llm, prompt, budget, grammar)
        text, reasoning = split_reasoning(raw)
        names = [t.name for t in request.tools]
        text, calls = parse_tool_calls(text, names)
        stop = "tool_use" if calls else ("max_tokens" if finish == "length" else "end_turn")
        return ModelResponse(
            text=text, tool_calls=calls, model=self.name, stop_reason=stop, reasoning=reasoning,
            usage=Usage(input_tokens=len(prompt), output_tokens=generated, cost_usd=0.0),
            info=self._info(budget, constrained),
        )

    def _info(self, max_tokens: int, grammar: bool) -> dict[str, Any]:
        return {
            "model_sha256": self._sha256,
            "llama_cpp_version": self._version,
            "n_ctx": self.n_ctx,
            "sampling": {
                "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "repeat_penalty": self.repeat_penalty, "seed": self.seed,
                "max_tokens": max_tokens, "grammar": grammar,
            },
        }

    def _call_grammar(self, tools: Sequence[ToolSpec]) -> Any:
        """A llama.cpp grammar for one call to one of ``tools``, cached per tool set."""
        key = json.dumps([[t.name, dict(t.input_schema)] for t in tools], sort_keys=True)
        cache: dict[str, Any] = self.__dict__.setdefault("_grammars", {})
        if key not in cache:
            cache[key] = None
            for schema in (call_schema(tools), _generic_schema(tools)):
                try:
                    cache[key] = self._grammar_cls.from_json_schema(json.dumps(schema),
                                                                    verbose=False)
                    break
                except (AssertionError, ValueError, KeyError, TypeError, RecursionError):
                    # llama-cpp's converter rejects some schema features (assert-based):
                    # fall back to "name from the offered set, arguments any object".
                    continue
        return cache[key]

    def _decode(self, llm: Any, prompt: list[int], budget: int,
                grammar: Any) -> tuple[str, int, str, bool]:
        """Decode one reply; tool calls are re-decoded under ``grammar`` once they start.

        Returns the raw reply text, tokens generated, why decoding stopped
        (``"stop"`` or ``"length"``), and whether a grammar was used.
        """
        reply = ""
        generated = 0
        constrained = False
        calls = 0
        while True:
            watch = grammar is not None and calls < _MAX_CALLS_PER_REPLY
            tokens = prompt + self._tokens(llm, reply)
            text, n, why = self._generate(llm, tokens, budget - generated, None, watch)
            generated += n
            if why != "call":
                return reply + text, generated, why, constrained
            reply += text + "<tool_call>\n"
            tokens = prompt + self._tokens(llm, reply)
            text, n, why = self._generate(llm, tokens, budget - generated, grammar, False)
            generated += n
            constrained = True
            calls += 1
            reply += text.strip() + "\n</tool_call>"
            if why == "length":
                return reply, generated, why, constrained

    @staticmethod
    def _tokens(llm: Any, text: str) -> list[int]:
        return list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else []

    def _generate(self, llm: Any, tokens: list[int], max_new: int, grammar: Any,
                  watch: bool) -> tuple[str, int, str]:
        """Sample up to ``max_new`` tokens; return (text, count, "stop"|"length"|"call").

        With ``watch``, stops as soon as the output starts a tool call (the
        ``<tool_call>`` token, or a line opening ``{"name":``, fenced or not);
        the text returned then ends before that call.
        """
        out: list[int] = []
        if max_new <= 0:
            return "", 0, "length"
        for token in llm.generate(tokens, temp=self.temperature, top_p=self.top_p,
                                  top_k=self.top_k, repeat_penalty=self.repeat_penalty,
                                  grammar=grammar):
            if token in self._eog:
                return self._text(llm, out), len(out), "stop"
            if watch and token == self._tool_call_token:
                return self._text(llm, out), len(out) + 1, "call"
            out.append(token)
            if watch:
                text = self._text(llm, out)
                match = _CALL_START.search(text)
                if match:
                    return text[: match.start()], len(out), "call"
            if len(out) >= max_new or len(tokens) + len(out) >= self.n_ctx:
                return self._text(llm, out), len(out), "length"
        return self._text(llm, out), len(out), "stop"

    @staticmethod
    def _text(llm: Any, tokens: list[int]) -> str:
        return bytes(llm.detokenize(tokens, special=True)).decode("utf-8", errors="replace")
