"""Model specs (``local``, ``scripted:FILE``) to model instances."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from overt.errors import UsageError
from overt.models.base import Model

Progress = Callable[[str], None]


def resolve_model(spec: str, *, cache_dir: str | Path | None = None,
                  progress: Progress | None = None) -> Model:
    """The model named by ``spec``.

    ``local`` is the embedded default (Qwen2.5-Coder-0.5B-Instruct on llama.cpp;
    weights assembled on first use). ``scripted:FILE`` replays a JSONL file of
    replies (see :mod:`overt.models.fake`).

    Raises:
        UsageError: the spec names no known model.
        ExtraMissingError: the model needs an extra that is not installed.
        ModelAssetError: the local weights cannot be assembled or fail their hash.
    """
    kind, _, arg = spec.partition(":")
    if kind == "scripted":
        if not arg:
            raise UsageError("scripted model needs a file: --model scripted:FILE")
        from overt.models.fake import ScriptedModel

        return ScriptedModel.from_jsonl(arg)
    if kind == "local":
        from overt.models.local import LocalModel

        return LocalModel.from_asset(arg or "default", cache_dir=cache_dir, progress=progress)
    raise UsageError(f"unknown model {spec!r}: use local or scripted:FILE")
