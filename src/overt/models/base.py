"""The Model protocol: one async method, a name, and optional closing."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from overt.types import ModelRequest, ModelResponse


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
