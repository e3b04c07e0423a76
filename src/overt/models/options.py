"""What a model provider is given to build a model (:class:`ModelOptions`), and the
names a config gives model specs (:class:`ModelAlias`).

Kept apart from :mod:`overt.models.resolve` (which imports the adapters) so an
adapter can take its options without importing the catalog back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Progress = Callable[[str], None]
"""Called with a line of download or load progress for the user."""


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """What a provider may need to build a model."""

    cache_dir: str | Path | None = None
    progress: Progress | None = None
    # Each provider's settings by scheme (API keys, base URLs, timeouts), from config.
    provider_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def settings(self, scheme: str) -> Mapping[str, Any]:
        """The settings of the provider of ``scheme`` (empty if none were given)."""
        return self.provider_settings.get(scheme, {})


@dataclass(frozen=True, slots=True)
class ModelAlias:
    """A name for a model spec (``[models.NAME]``), with provider settings over the
    provider's own (``base_url``, ``api_key``, ...). ``api_key_env`` in ``settings`` names
    the variable the entry point reads the key from. A
    :class:`~overt.models.resolve.ModelCatalog` resolves the name
    (:meth:`~overt.models.resolve.ModelCatalog.alias`)."""

    spec: str
    settings: Mapping[str, Any] = field(default_factory=dict)
