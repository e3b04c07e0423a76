"""A model that moves to the next one when a provider fails: ``FallbackModel([a, b, ...])``.

A :class:`~overt.errors.ModelError` from one model (a provider outage, a
rate limit its adapter gave up on, a missing key) moves the call to the next;
any other exception is a bug in an adapter and propagates. An answer that
came after a failure says so on the record, in the response's ``info``
(recorded with the inference): ``fallback_from`` (the models that failed, in
order) and ``fallback_errors`` (their exception types), identifiers only; and
``response.model`` names the model that answered. When every model fails,
the :class:`ModelError` names each failure.

It streams (:meth:`FallbackModel.complete_stream`) through whichever model answers, if
that one can; text a failed model had streamed before it failed is settled by
the engine (:mod:`overt.engine.answer_stream`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from overt.errors import ModelError, UsageError
from overt.models.base import Model, TextSink, complete_streaming
from overt.types import ModelRequest, ModelResponse

log = logging.getLogger("overt.models.fallback")


class FallbackModel:
    """Asks ``models`` in order until one answers.

    ``name`` (default: the first model's) is what the engine records as the
    model asked; each inference's ``model`` is the one that answered.

    Raises:
        UsageError: ``models`` is empty.
    """

    def __init__(self, models: Sequence[Model], *, name: str | None = None) -> None:
        if not models:
            raise UsageError("FallbackModel needs at least one model")
        self.models = tuple(models)
        self.name = name or self.models[0].name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The first answer of ``models``, in order.

        Raises:
            ModelError: every model failed; the message names each failure.
        """
        return await self._first(request, None)

    async def complete_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """As :meth:`complete`, streaming from each model asked that can stream.

        Raises:
            ModelError: every model failed; the message names each failure.
        """
        return await self._first(request, on_text)

    async def _first(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
        failed: list[tuple[str, ModelError]] = []
        for model in self.models:
            try:
                response = await complete_streaming(model, request, on_text)
            except ModelError as exc:
                log.warning("model %s failed (%s); falling back", model.name,
                            type(exc).__name__)
                failed.append((model.name, exc))
                continue
            if not failed:
                return response
            return replace(response, model=response.model or model.name, info={
                **response.info,
                "fallback_from": [name for name, _ in failed],
                "fallback_errors": [type(exc).__name__ for _, exc in failed]})
        raise ModelError("every model failed: " + "; ".join(
            f"{name}: {type(exc).__name__}: {exc}" for name, exc in failed)) from failed[-1][1]

    def close(self) -> None:
        """Close each model that can be closed."""
        for model in self.models:
            closer = getattr(model, "close", None)
            if closer is not None:
                closer()
