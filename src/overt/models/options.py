"""What a model provider is given to build a model: :class:`ModelOptions`.

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
