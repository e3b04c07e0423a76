"""Model specs (``local``, ``scripted:FILE``, ``NAME``) to model instances.

A spec is ``SCHEME`` or ``SCHEME:ARG``. Each scheme is a :class:`ModelProvider`;
overt's own (``local``, ``scripted``) arrive through the built-in plugin's
``register_models`` hook like any plugin's, and a plugin may also register a
ready :class:`~overt.models.base.Model`, addressed by its ``name``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from overt.errors import UsageError
from overt.models.base import Model
from overt.models.options import ModelOptions


@dataclass(frozen=True, slots=True)
class ModelProvider:
    """Builds the models of one spec scheme: ``build(ARG, options)`` for ``SCHEME:ARG``."""

    scheme: str
    build: Callable[[str, ModelOptions], Model]
    description: str = ""


def _scripted(arg: str, options: ModelOptions) -> Model:
    if not arg:
        raise UsageError("scripted model needs a file: --model scripted:FILE")
    from overt.models.fake import ScriptedModel

    return ScriptedModel.from_jsonl(arg, replay_turn=True)


def _local(arg: str, options: ModelOptions) -> Model:
    from overt.models.local import LocalModel

    return LocalModel.from_asset(arg or "default", cache_dir=options.cache_dir,
                                 progress=options.progress)


def _anthropic(arg: str, options: ModelOptions) -> Model:
    from overt.models.anthropic import build

    return build(arg, options)


def _openai(arg: str, options: ModelOptions) -> Model:
    from overt.models.openai_compat import build

    return build(arg, options)


def builtin_providers() -> list[ModelProvider]:
    """overt's own model schemes. Each adapter is imported only when a model of its
    scheme is built, so start-up never pays for an SDK it does not use."""
    return [
        ModelProvider("local", _local, "the embedded default model (llama.cpp)"),
        ModelProvider("scripted", _scripted, "replies replayed from a JSONL file"),
        ModelProvider("anthropic", _anthropic, "Claude, over the Anthropic Messages API"),
        ModelProvider("openai", _openai,
                      "any OpenAI-compatible chat completions server (OpenAI, vLLM, llama.cpp)"),
    ]


class ModelCatalog:
    """Models by spec: registered instances by name, then providers by scheme.

    Built models are kept, so one spec names one instance for the runtime's life.
    """

    def __init__(self, entries: Iterable[Model | ModelProvider] = (), *,
                 options: ModelOptions | None = None) -> None:
        self.options = options or ModelOptions()
        self._models: dict[str, Model] = {}
        self._providers: dict[str, ModelProvider] = {}
        self._aliases: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: Model | ModelProvider) -> None:
        """Register a model instance or a provider.

        Raises:
            UsageError: it is neither, or its name or scheme is taken.
        """
        if isinstance(entry, ModelProvider):
            if entry.scheme in self._providers:
                raise UsageError(f"a model provider for {entry.scheme!r} is already registered")
            self._providers[entry.scheme] = entry
        elif isinstance(entry, Model):
            if entry.name in self._models:
                raise UsageError(f"a model named {entry.name!r} is already registered")
            self._models[entry.name] = entry
        else:
            raise UsageError(f"not a model or a model provider: {type(entry).__name__}")

    def alias(self, name: str, spec: str, settings: Mapping[str, Any] | None = None) -> None:
        """Let ``name`` stand for ``spec`` (a config's ``[models.NAME]``), built with
        ``settings`` over its provider's settings."""
        self._aliases[name] = (spec, dict(settings or {}))

    @property
    def schemes(self) -> list[str]:
        return list(self._providers)

    def built(self) -> list[Model]:
        """The models registered or built so far (for closing them)."""
        return list(self._models.values())

    def get(self, spec: str) -> Model:
        """The model ``spec`` names.

        Raises:
            UsageError: no registered model or provider matches.
            ExtraMissingError, ModelAssetError: the provider cannot build it.
        """
        model = self._models.get(spec)
        if model is not None:
            return model
        target, settings = self._aliases.get(spec, (spec, {}))
        scheme, _, arg = target.partition(":")
        provider = self._providers.get(scheme)
        if provider is None:
            known = sorted([*self._providers, *self._models, *self._aliases]) or ["none"]
            raise UsageError(f"unknown model {spec!r}: use one of {', '.join(known)}")
        options = self.options if not settings else replace(self.options, provider_settings={
            **self.options.provider_settings, scheme: {**self.options.settings(scheme),
                                                       **settings}})
        model = provider.build(arg, options)
        self._models[spec] = model
        return model
