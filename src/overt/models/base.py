"""The Model protocol: one async method, a name, and optional closing; and the
optional streaming capability, :class:`StreamingModel`, that a model adds beside it.

Streaming is composed, not inherited: a model that can stream has a ``complete_stream``
method too, and :func:`complete_streaming` asks for it only where it exists, so
every model still answers through ``complete``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol, get_args, runtime_checkable

from overt.types import ModelRequest, ModelResponse, ToolSpec

AdapterDecision = Literal["tools_hidden", "reply_redecoded", "grammar_applied",
                          "answer_without_tools"]
"""What an adapter may decide on its own for one reply (``ModelResponse.decisions``):
``tools_hidden``: it did not show the model every tool offered; ``reply_redecoded``:
it decoded the reply again (the embedded model's "no tool" choice);
``grammar_applied``: a grammar shaped a tool call; ``answer_without_tools``: it sent
the call after tool results as an answer call without tools. A closed set: the audit
tier records nothing else."""
ADAPTER_DECISIONS: tuple[str, ...] = get_args(AdapterDecision)

TextSink = Callable[[str], None]
"""Where a streaming model sends each piece of answer text as it is generated."""


@runtime_checkable
class Model(Protocol):
    """Anything that answers a :class:`ModelRequest`.

    ``name`` is what the ledger records as the model (``"local:qwen2.5-coder-0.5b"``).
    ``complete`` raises :class:`overt.errors.ModelError` when it cannot answer;
    any other exception escaping it is a bug in the adapter, and the engine
    records it as a model error too.
    """

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class StreamingModel(Protocol):
    """A model that can also send its answer text as it is generated.

    ``complete_stream(request, on_text)`` answers exactly as ``complete(request)`` would
    (the same :class:`ModelResponse`, raising the same errors), and meanwhile
    calls ``on_text`` on the event loop's thread with each new piece of text that
    may be the answer, in order. It never sends tool-call markup, ``<think>``
    blocks or provider thinking: what it sends is a candidate for the answer,
    and the engine (:mod:`overt.engine.answer_stream`) reconciles it with what
    the response turns out to be (a response with tool calls is not an answer).
    """

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse: ...


@runtime_checkable
class Warms(Protocol):
    """A model that can prepare, before its first request, what every request begins
    with (the embedded model: its weights, and the KV state of its system turn).
    ``warm`` blocks; it may be called again."""

    def warm(self, request: ModelRequest) -> None: ...


@runtime_checkable
class ListsTools(Protocol):
    """A model that lists tools in its prompt other than exactly those offered (the
    embedded model adds a "no tool" choice): ``shown_tools`` says what it lists for
    ``offered``, so what the model is shown can be digested (``overt eval``)."""

    def shown_tools(self, offered: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]: ...


async def complete_streaming(model: Model, request: ModelRequest,
                             on_text: TextSink | None) -> ModelResponse:
    """``model``'s answer to ``request``, streamed to ``on_text`` when the model can
    stream and a sink is given; otherwise plain ``complete``.

    Raises:
        ModelError: whatever ``complete`` or ``stream`` raise.
    """
    if on_text is not None and isinstance(model, StreamingModel):
        return await model.complete_stream(request, on_text)
    return await model.complete(request)
