"""The embedded models, run by llama.cpp: ``local`` (Qwen2.5-Coder-1.5B-Instruct, the
default) and ``local:small`` (Qwen2.5-Coder-0.5B-Instruct).

Decoding strategy, and why
--------------------------

The strategy was worked out on the 0.5B model and holds for both (on the 1.5B
model the eval scores 92-94% with it). A 0.5B model picks a sensible tool most
of the time, but left alone it writes the call as bare or fenced JSON (rarely
in ``<tool_call>`` tags) and invents arguments (``{"since": "today"}``,
``{"additionalProperties": false}``). And once a tool result is in the
Qwen-native context with the tools still listed,
it calls a tool again instead of answering, round after round. So:

1. **Tool turn** (tools offered, no tool result yet since the last user
   message): the prompt is the GGUF's own template with the ``# Tools``
   section (:func:`overt.models.qwen_chat.render_chatml`). Decoding runs free
   and watches the output; as soon as it opens a call (the ``<tool_call>``
   token, or a line starting ``{"name": "…", "arguments"``, fenced or not),
   the call is cut off and decoded again after a forced ``<tool_call>\\n``
   under a llama.cpp grammar built from the JSON schema
   ``{"name": <one offered name>, "arguments": <that tool's input schema>}``.
   Then ``\\n</tool_call>`` is appended and free decoding resumes (the model
   may add another call, at most four, or stop). Free decoding first keeps
   plain answers and code (a ``package.json`` is not a call: no ``arguments``
   key) unconstrained; the grammar only shapes a call the model has begun.
   What the grammar offers (:mod:`overt.models.call_choice`): the offered
   tools, their id arguments limited to the ids the conversation holds, and two
   choices shown with the tools: ``cannot_do`` (chosen, the reply is decoded without
   tools after "I cannot do that from here.", in the operator's language) and
   ``reply`` (chosen, the reply is decoded without tools; one that states a figure
   no message holds, or that fails the follow-up checks below, is dropped for a
   call). A
   reply that opens a fenced JSON block, restates a figure of an earlier
   answer or, in a follow-up, states a figure no message holds is a call too.
2. **Answer turn** (tool results present): the tools list is dropped, and the
   tool round is folded into one user message, "My question: … Here is what
   the tools returned: … Answer my question now …"
   (:func:`overt.models.qwen_chat.answer_messages`). One tool round per
   question, with every call of that round answered.

The grammar is what makes a small model's calls valid: without it, a small model
invents arguments (``{"type": "string"}``) or echoes the schema; and the folded
answer turn is what makes it answer from the returned values instead of calling a
tool again or echoing the JSON.

Template markup is tokenized with special tokens parsed, message content and
tool results without: a tool result holding ``<|im_start|>`` stays text and
cannot open a turn. Usage counts llama tokens (prompt, generated); cost is 0. ``info`` carries the
weights' digest, the llama-cpp-python version and its build's CPU features
(``llama_cpp_build``), the sampling parameters (with
``grammar``: whether a grammar shaped this reply), ``n_ctx`` and ``prefix``: where the
system turn's KV state came from (``disk``: the prefix cache, ``memory``: the prefix
cache's copy this process keeps, ``prefilled``: computed and then saved there,
``held``: this process's previous call, ``none``: not cached).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import math
import os
import re
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from overt.errors import ExtraMissingError, ModelError, UsageError
from overt.models import llama_sampling
from overt.models.assets import (
    ASSETS,
    DEFAULT_ASSET,
    ModelAsset,
    Progress,
    ensure_asset,
    known_sha256,
)
from overt.models.base import TextSink
from overt.models.call_choice import (
    CHOICES,
    DECLINE,
    callable_tools,
    choosable,
    decline_opening,
    follow_up_figures,
    ids_in,
    invents,
    listing,
    opens_json_fence,
    restates,
    stale_figures,
    unsourced,
)
from overt.models.prefix_cache import MIN_PREFIX_TOKENS, PrefixCache
from overt.models.qwen_chat import (
    Segment,
    answer_messages,
    call_schema,
    has_tool_results,
    loose_call_schema,
    render_segments,
)
from overt.models.stream_text import AnswerFilter
from overt.models.toolcall_parse import parse_tool_calls, split_reasoning
from overt.types import Message, ModelRequest, ModelResponse, ToolSpec, Usage

AnswerStyle = Literal["user_message", "native"]

_MAX_CALLS_PER_REPLY = 4
_CALL_START = re.compile(
    r'(?:^|\n)[ \t]*(?:```[a-z_]*[ \t]*\n[ \t]*)?'
    r'\{\s*"name"\s*:\s*"(?:[^"\\\n]|\\.)*"\s*,\s*"(?:arguments|parameters)"'
)


def _system_turn(segments: Sequence[Segment]) -> list[Segment]:
    """The segments of the system turn (system prompt and tools), up to its end."""
    for i, (text, markup) in enumerate(segments):
        if markup and text == "<|im_end|>\n":
            return list(segments[:i + 1])
    return []


def _joined(segments: Sequence[Segment]) -> str:
    return "".join(text for text, _ in segments)


class LocalModel:
    """A Qwen2.5 GGUF run in-process by llama.cpp (the ``local`` extra).

    Construction resolves the weights: ``model_path`` as given, or ``asset``
    assembled into ``cache_dir`` by :func:`overt.models.assets.ensure_asset`
    (a no-op when already verified). llama.cpp itself loads on the first
    :meth:`complete`, or on :meth:`load`.

    ``answer_style="native"`` answers tool results in the template's own
    ``<tool_response>`` form with the tools still offered; meant for larger
    models, it makes the 0.5B one loop (see the module docstring), and the 1.5B
    one too: 22/49 on the eval, 18 turns ended by the breaker, against 45-46/49.

    ``prefix_cache``: keep the KV state of the system turn (system prompt and
    tool schemas, the same in every request of a runtime) on disk, in the
    cache directory's ``prefix/`` (beside the weights for ``model_path``; a
    path given: there), so a new process loads it
    instead of prefilling ~2,300 tokens (:mod:`overt.models.prefix_cache`).

    Raises:
        ModelAssetError: the weights are missing (and ``download`` is false),
            cannot be fetched, or fail their hash check.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        asset: ModelAsset = DEFAULT_ASSET,
        cache_dir: str | os.PathLike[str] | None = None,
        progress: Progress | None = None,
        download: bool = True,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        top_p: float = 0.8,
        top_k: int = 20,
        repeat_penalty: float = 1.05,
        max_tokens: int = 512,
        grammar: bool = True,
        answer_style: AnswerStyle = "user_message",
        name: str | None = None,
        prefix_cache: bool | str | os.PathLike[str] = True,
        call_threshold: float = 0.002,
        decline: bool = True,
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
        cpus = os.cpu_count() or 1
        # Every core, as llama.cpp itself defaults: on quiet cores a loaded model
        # answers sooner with more threads. On a machine other work keeps busy,
        # generation (which syncs its threads once per layer per token) can stall on
        # a descheduled thread: pass n_threads=1 there.
        self.n_threads = n_threads or cpus
        self.n_threads_batch = n_threads_batch or cpus
        self.seed = seed
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.repeat_penalty = repeat_penalty
        self.max_tokens = max_tokens
        self.grammar = grammar
        self.answer_style = answer_style
        self.call_threshold = call_threshold
        self.decline = decline
        self._call_starts: set[int] = set()
        self._logits: Callable[[Any], Any] | None = None
        self._lock = threading.Lock()
        self._llm: Any = None
        self._grammar_cls: Any = None
        self._version = "unknown"
        self._build = ""
        self._grammars: dict[str, Any] = {}
        self._tool_call_token = -1
        self._eog: set[int] = set()
        self._prefix_dir: Path | None = None
        if isinstance(prefix_cache, str | os.PathLike):
            self._prefix_dir = Path(prefix_cache)
        elif prefix_cache:  # the cache directory's prefix/, or beside weights given by path
            base = self.path.parent.parent if model_path is None else self.path.parent
            self._prefix_dir = base / "prefix"
        self._prefix_source = "none"
        self._prefixes: PrefixCache | None = None

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
        """The local model named by ``variant``: ``"default"`` or ``""`` (the 1.5B model,
        also ``"quality"``) or ``"small"`` (the 0.5B one); ``"local"``, ``"local:quality"``
        and ``"local:small"`` work too.

        ``options`` go to the constructor (``n_ctx``, ``temperature``, …).

        Raises:
            UsageError: no local model has that name.
            ModelAssetError: the weights cannot be assembled or fail their hash.
        """
        key = variant if variant.startswith("local") else f"local:{variant}"
        if key in ("local:", "local:default"):
            key = "local"
        asset = ASSETS.get(key)
        if asset is None:
            raise UsageError(f"no local model {variant!r}; known: {', '.join(sorted(ASSETS))}")
        return cls(asset=asset, cache_dir=cache_dir, progress=progress, download=download,
                   **options)

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens in this model's vocabulary once it is loaded; before that
        the high estimate every model without a tokenizer gets (loading the weights
        to count would cost more than the count saves)."""
        llm = self._llm
        if llm is None:
            from overt.sessions.window import estimate_tokens

            return estimate_tokens(text)
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def load(self) -> None:
        """Load llama.cpp and the weights now (otherwise the first call does).

        Raises:
            ExtraMissingError: ``llama_cpp`` is not installed (the ``local`` extra).
            ModelError: llama.cpp could not load the file.
            ModelAssetError: the file's digest could not be read.
        """
        with self._lock:
            self._load_locked()

    def warm(self, request: ModelRequest) -> None:
        """Load the weights and have the KV cache, and the prefix cache, hold the system
        turn ``request`` makes (blocking). After a change of prompt or tools that is a
        prefill of ~2,600 tokens (tens of seconds on a small CPU) done before
        anyone asks; otherwise a read from disk. (The answer turn's system turn, the
        same prompt without the tools, is never cached: it shares most of its tokens
        with the call turn's, which llama.cpp's prefix match reuses.)

        Raises:
            ExtraMissingError, ModelError, ModelAssetError: as :meth:`load`.
        """
        with self._lock:
            llm = self._load_locked()
            segments = render_segments(request.messages, self.shown_tools(request.tools))
            self._warm_prefix(llm, self._tokens(llm, _system_turn(segments)))

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
            llm = llama_cpp.Llama(model_path=str(self.path), n_ctx=self.n_ctx,
                                  n_threads=self.n_threads,
                                  n_threads_batch=self.n_threads_batch, seed=self.seed,
                                  verbose=False)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp could not load {self.path}: {exc}") from exc
        special = llm.tokenize(b"<tool_call><|im_end|><|endoftext|>", add_bos=False, special=True)
        self._tool_call_token = special[0]
        self._eog = {llm.token_eos(), *special[1:]}
        self._call_starts = {self._tool_call_token}
        for start in ('{"', "{", "{\n", "```"):
            tokens = llm.tokenize(start.encode("utf-8"), add_bos=False, special=False)
            if len(tokens) == 1:
                self._call_starts.add(tokens[0])
        self._logits = getattr(llama_cpp, "llama_get_logits", None)
        self._version = str(getattr(llama_cpp, "__version__", "unknown"))
        system_info = getattr(llama_cpp, "llama_print_system_info", None)
        self._build = (bytes(system_info()).decode("utf-8", "replace").strip(" |")
                       if system_info is not None else "")
        self._grammar_cls = LlamaGrammar
        if self._prefix_dir is not None and hasattr(llama_cpp, "llama_state_get_data"):
            self._prefixes = PrefixCache(self._prefix_dir, model_sha256=self._sha256,
                                         n_ctx=self.n_ctx, llama_cpp_version=self._version,
                                         build=self._build)
        self._llm = llm
        return llm

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request``. Inference runs in a worker thread, one call at a time.

        Raises:
            ExtraMissingError: ``llama_cpp`` is not installed.
            ModelError: llama.cpp failed, or the prompt does not fit ``n_ctx``.
        """
        return await asyncio.to_thread(self._complete_sync, request)

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """As :meth:`complete`, sending the answer's text to ``on_text`` as it is
        decoded: each token's text goes from the worker thread to the event loop,
        through :class:`~overt.models.stream_text.AnswerFilter` (no call markup, no
        ``<think>``); once the model opens a tool call nothing more is sent.

        Raises:
            ExtraMissingError: ``llama_cpp`` is not installed.
            ModelError: llama.cpp failed, or the prompt does not fit ``n_ctx``.
        """
        loop = asyncio.get_running_loop()
        answer = AnswerFilter(on_text)

        def piece(text: str) -> None:  # called on the worker thread, in order
            loop.call_soon_threadsafe(answer.feed, text)

        return await asyncio.to_thread(self._complete_sync, request, piece)

    def _complete_sync(self, request: ModelRequest,
                       on_text: Callable[[str], None] | None = None) -> ModelResponse:
        with self._lock:  # one Llama is not thread-safe
            llm = self._load_locked()
            try:
                return self._infer(llm, request, on_text)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"{self.name}: llama.cpp failed: {exc}") from exc

    # -- inference -----------------------------------------------------------

    def _infer(self, llm: Any, request: ModelRequest,
               on_text: Callable[[str], None] | None = None) -> ModelResponse:
        messages: Sequence[Message] = request.messages
        offered: Sequence[ToolSpec] = request.tools
        if has_tool_results(messages) and self.answer_style == "user_message":
            messages, offered = answer_messages(messages), ()
        decisions: list[str] = []
        if len(offered) < len(request.tools):
            decisions.append("answer_without_tools")
        shown = self.shown_tools(offered)
        choice = (callable_tools(choosable(shown, messages), ids_in(messages))
                  if self.grammar else [])
        if {t.name for t in offered} - {t.name for t in choice} and choice:
            decisions.append("tools_hidden")  # a call may only name the choosable ones
        prompts: list[str] = []
        raw, prompt_len, generated, finish, constrained, budget = self._reply(
            llm, request, messages, shown, choice, on_text, prompts=prompts)
        text, reasoning = split_reasoning(raw)
        text, calls = parse_tool_calls(text, [t.name for t in request.tools])
        if any(c.name in CHOICES for c in calls):  # no tool: answer without one
            declined = any(c.name == DECLINE.name for c in calls)
            raw, again, more, finish, _, budget = self._reply(
                llm, request, messages, (), [], on_text,
                opening=decline_opening(messages) if declined else "", prompts=prompts)
            prompt_len, generated = prompt_len + again, generated + more
            text, reasoning = split_reasoning(raw)
            calls = ()
            decisions.append("reply_redecoded")
            tools_only = [t for t in choice if t.name not in CHOICES]
            if not declined and tools_only and (
                    unsourced(text, messages) or restates(text, stale_figures(messages))
                    or invents(text, follow_up_figures(messages))):
                # a figure from nothing, or (in a follow-up) an earlier answer's or one
                # no message holds, as for a reply without a call: a tool is called
                raw, again, more, finish, constrained, budget = self._reply(
                    llm, request, messages, shown, tools_only, on_text, prompts=prompts,
                    call_first=True)
                prompt_len, generated = prompt_len + again, generated + more
                text, reasoning = split_reasoning(raw)
                text, calls = parse_tool_calls(text, [t.name for t in request.tools])
        if constrained:
            decisions.append("grammar_applied")
        stop = "tool_use" if calls else ("max_tokens" if finish == "length" else "end_turn")
        info = self._info(budget, constrained)
        sent = {"prompts": prompts, "grammar_tools": [t.name for t in choice] or None,
                "model_sha256": self._sha256, "seed": self.seed, "sampling": info["sampling"]}
        return ModelResponse(
            text=text, tool_calls=calls, model=self.name, stop_reason=stop, reasoning=reasoning,
            usage=Usage(input_tokens=prompt_len, output_tokens=generated, cost_usd=0.0),
            info=info, sent=sent, decisions=tuple(decisions),
        )

    def shown_tools(self, offered: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The tools as this model lists them in its prompt: ``offered``, then the
        call choice's own entries (:data:`~overt.models.call_choice.DECLINE`). The
        eval's prompt digest covers this listing, so a change to it is on the record."""
        return listing(offered, self.decline and self.grammar) if offered else ()

    def _reply(self, llm: Any, request: ModelRequest, messages: Sequence[Message],
               shown: Sequence[ToolSpec], choice: Sequence[ToolSpec],
               on_text: Callable[[str], None] | None,
               opening: str = "", prompts: list[str] | None = None,
               call_first: bool = False) -> tuple[str, int, int, str, bool, int]:
        """Decode one reply to ``messages`` with ``shown`` listed and a call limited to
        ``choice``, after ``opening`` (text the reply is made to begin with; with
        ``call_first``, the reply opens with a call): (raw text, prompt tokens,
        generated, finish, grammar used, budget)."""
        segments = render_segments(messages, shown)
        if prompts is not None:  # the text rendered for the model (``sent``)
            prompts.append(_joined([*segments, (opening, False)]))
        prompt = self._tokens(llm, [*segments, (opening, False)])
        self._warm_prefix(llm, self._tokens(llm, _system_turn(segments)))
        room = self.n_ctx - len(prompt)
        if room < 16:
            raise ModelError(f"{self.name}: the prompt is {len(prompt)} tokens; it does not fit "
                             f"the context window of {self.n_ctx} tokens")
        budget = min(request.max_output_tokens or self.max_tokens, room)
        grammar = self._call_grammar(choice) if choice else None
        if opening and on_text is not None:
            on_text(opening)
        raw, generated, finish, constrained = self._decode(
            llm, prompt, budget, grammar, on_text, stale_figures(messages) if choice else (),
            follow_up_figures(messages) if choice else None, call_first=call_first)
        return opening + raw, len(prompt), generated, finish, constrained, budget

    def _warm_prefix(self, llm: Any, prefix: list[int]) -> None:
        """Have ``llm``'s KV cache hold the fixed ``prefix`` (the system turn with the
        tools), from this process's last call, else from the prefix cache (held in
        memory, or on disk), else by prefilling it and saving it there. llama.cpp's
        own prefix match then reuses it for the prompt that follows."""
        cache = self._prefixes
        self._prefix_source = "none"
        if cache is None or len(prefix) < MIN_PREFIX_TOKENS:
            return
        held = list(llm.input_ids[:min(llm.n_tokens, len(prefix))])
        shared = next((i for i, (a, b) in enumerate(zip(held, prefix, strict=False))
                       if a != b), len(held))
        if shared * 2 >= len(prefix):  # most of it is already here: prefill the rest
            self._prefix_source = "held"
            return
        source = cache.load(llm, prefix)
        if source is not None:
            self._prefix_source = source
            return
        llm.reset()
        llm.eval(prefix)
        cache.save(llm, prefix)
        self._prefix_source = "prefilled"

    def _info(self, max_tokens: int, grammar: bool) -> dict[str, Any]:
        return {
            "model_sha256": self._sha256,
            "llama_cpp_version": self._version,
            "llama_cpp_build": self._build,
            "n_ctx": self.n_ctx,
            "prefix": self._prefix_source,
            "sampling": {
                "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "repeat_penalty": self.repeat_penalty, "seed": self.seed,
                "max_tokens": max_tokens, "grammar": grammar,
                "call_threshold": self.call_threshold,
            },
        }

    def _call_grammar(self, tools: Sequence[ToolSpec]) -> Any:
        """The grammar of one call to one of ``tools`` (cached per tool set), or None."""
        key = json.dumps([[t.name, dict(t.input_schema)] for t in tools], sort_keys=True,
                         default=str)
        if key not in self._grammars:
            self._grammars[key] = None
            for schema in (call_schema(tools), loose_call_schema(tools)):
                try:
                    self._grammars[key] = self._grammar_cls.from_json_schema(
                        json.dumps(schema), verbose=False)
                    break
                except (AssertionError, ValueError, KeyError, TypeError, RecursionError):
                    # llama-cpp's converter rejects some schema features with asserts;
                    # the loose schema still pins the name. Failing both, decode free:
                    # the parser and the engine's argument check still apply.
                    continue
        return self._grammars[key]

    def _decode(self, llm: Any, prompt: list[int], budget: int, grammar: Any,
                on_text: Callable[[str], None] | None = None,
                stale: Collection[str] = (), said: Collection[str] | None = None,
                call_first: bool = False) -> tuple[str, int, str, bool]:
        """Decode one reply; a tool call the model begins is re-decoded under ``grammar``.

        A reply without a call that restates one of the ``stale`` figures (those of the
        assistant's earlier answers), or in a follow-up states one no message holds
        (none of ``said``), is dropped for a call: an earlier answer's value does not
        answer a new question (:func:`~overt.models.call_choice.restates`, ``invents``).
        With ``call_first`` (and a ``grammar``), the reply opens with a call.

        Returns the raw reply, tokens generated, why decoding stopped
        (``"stop"`` or ``"length"``), and whether the grammar was used. Only the
        text before a first call goes to ``on_text`` (a reply with calls is no answer).
        """
        reply: list[Segment] = []  # the model's text is content; what we force is markup
        generated = 0
        calls = 0
        while True:
            watch = grammar is not None and calls < _MAX_CALLS_PER_REPLY
            if call_first and watch and not reply:
                text, n, why = "", 0, "call"
            else:
                text, n, why = self._generate(llm, prompt + self._tokens(llm, reply),
                                              budget - generated, None, watch,
                                              None if calls else on_text, probe=not reply)
            generated += n
            if why == "stop" and watch and not reply and (
                    restates(text, stale) or invents(text, said)):
                text, why = "", "call"
            if why != "call":
                return _joined([*reply, (text, False)]), generated, why, calls > 0
            reply.append((text.rstrip(), False))
            reply.append(("\n<tool_call>\n" if _joined(reply) else "<tool_call>\n", True))
            text, n, why = self._generate(llm, prompt + self._tokens(llm, reply),
                                          budget - generated, grammar, False)
            generated += n
            calls += 1
            reply += [(text.strip(), False), ("\n</tool_call>", True)]
            if why == "length":
                return _joined(reply), generated, why, True

    def _generate(self, llm: Any, tokens: list[int], max_new: int, grammar: Any,
                  watch: bool, on_text: Callable[[str], None] | None = None,
                  probe: bool = False) -> tuple[str, int, str]:
        """Sample up to ``max_new`` tokens; return (text, count, ``stop|length|call``).

        With ``watch``, stops as soon as the output opens a tool call; the text
        returned then ends before the call. ``on_text`` gets each token's text as
        it is sampled (whole characters only). With ``probe`` (the start of a reply),
        a first token that opens no call still ends in ``call`` when a call is likely
        enough there (:meth:`_call_likely`).
        """
        if max_new <= 0:
            return "", 0, "length"
        with contextlib.closing(llama_sampling.sample_tokens(
                llm, tokens, grammar=grammar, temperature=self.temperature, top_k=self.top_k,
                top_p=self.top_p, repeat_penalty=self.repeat_penalty, seed=self.seed)) as sampled:
            return self._watch(llm, sampled, len(tokens), max_new, watch, on_text, probe)

    def _watch(self, llm: Any, sampled: Iterator[int], n_prompt: int, max_new: int,
               watch: bool, on_text: Callable[[str], None] | None,
               probe: bool) -> tuple[str, int, str]:
        out: list[int] = []
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for token in sampled:
            if probe and not out and watch and self._call_likely(llm, token):
                return "", 0, "call"
            if token in self._eog:
                return self._text(llm, out), len(out), "stop"
            if watch and token == self._tool_call_token:
                return self._text(llm, out), len(out) + 1, "call"
            out.append(token)
            if on_text is not None:
                on_text(utf8.decode(bytes(llm.detokenize([token], special=True))))
            if watch:
                match = _CALL_START.search(text := self._text(llm, out))
                if match:
                    return text[: match.start()], len(out), "call"
                if probe and opens_json_fence(text):  # a tool's data, made up: a call
                    return "", len(out), "call"
            if len(out) >= max_new or n_prompt + len(out) >= self.n_ctx:
                return self._text(llm, out), len(out), "length"
        return self._text(llm, out), len(out), "stop"

    def _call_likely(self, llm: Any, first: int) -> bool:
        """Whether a reply whose greedy first token is ``first`` (not a call's opening)
        should still be a call: the openings of a call (``<tool_call>``, ``{"``, a
        fence) together hold at least ``call_threshold`` of the first token's
        probability. The 0.5B model answers "what's the staging host?" from nothing
        with a call at 0.6% and "thanks" with one at 0.0%; a call it thinks possible
        is made, and its result grounds the answer."""
        if self.call_threshold <= 0 or self._logits is None or first in self._call_starts:
            return False
        row = self._logits(llm.ctx)[:int(llm.n_vocab())]  # the last position's logits
        top = max(row)
        total = sum(math.exp(x - top) for x in row)
        calls = sum(math.exp(row[t] - top) for t in self._call_starts)
        return calls / total >= self.call_threshold

    @staticmethod
    def _tokens(llm: Any, segments: Sequence[Segment]) -> list[int]:
        """Tokens of ``segments``: special tokens are parsed in markup only."""
        tokens: list[int] = []
        for text, markup in segments:
            if text:
                tokens += llm.tokenize(text.encode("utf-8"), add_bos=False, special=markup)
        return tokens

    @staticmethod
    def _text(llm: Any, tokens: list[int]) -> str:
        return bytes(llm.detokenize(tokens, special=True)).decode("utf-8", errors="replace")
